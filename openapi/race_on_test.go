//go:build race

package openapi_test

// raceEnabled says whether the race detector is on: it changes what is
// allocated, so memory bounds differ.
const raceEnabled = true
