// Package axtype holds the domain vocabulary of ax: row types (Job,
// Execution, Task, Agent, APIKey…), states and policies with their
// constants, job defaults, error codes, limits, and the errors the store
// returns. It imports no database driver, so every layer (db, queue,
// openapi, the console, the agent) can share it; package db stores and
// loads these types and keeps only the access to Postgres.
package axtype
