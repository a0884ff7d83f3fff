// Command specgen is `ax openapi` (package speccmd) built without the
// rest of ax: make generate runs it before the Go client that cmd/ax
// imports is regenerated from its output.
package main

import (
	"os"

	"github.com/ax-scheduler/ax/openapi/speccmd"
)

func main() {
	cmd := speccmd.Command()
	cmd.Use = "specgen"
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
