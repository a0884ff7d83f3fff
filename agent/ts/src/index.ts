// @ax-scheduler/agent: run async TypeScript functions as tasks of the ax
// job scheduler, over the agent protocol of its OpenAPI spec (through the
// generated client, @ax-scheduler/client).
export { Agent, StatusError, type AgentOptions, type Handler, type Logger } from "./agent.js";
export { checkJobs, wireJob, type JobSpec, type RetryPolicy } from "./jobs.js";
export { TaskCancelled, TaskError, validErrorCode, type CancelReason, type Task } from "./task.js";
