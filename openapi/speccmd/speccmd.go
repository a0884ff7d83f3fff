// Package speccmd is the one program that writes ax's OpenAPI specs: `ax
// openapi` and openapi/specgen (which make generate runs) are both this
// command. specgen stays a main of its own because make generate runs it
// before the Go client is regenerated from its output, and cmd/ax imports
// that client: building ax first would need the client not yet written.
package speccmd

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi"
)

// Command is the spec writer: both documents into --dir, or with --print
// the 3.1 document (openapi.yaml's bytes) to standard output.
func Command() *cobra.Command {
	cmd := &cobra.Command{Use: "openapi", Short: "Write the OpenAPI 3.1 spec and its 3.0 downgrade", Args: cobra.NoArgs}
	dir := cmd.Flags().String("dir", "openapi", "folder to write "+openapi.SpecFile31+" and "+openapi.SpecFile30+" to")
	print := cmd.Flags().Bool("print", false, "print the 3.1 spec ("+openapi.SpecFile31+") to standard output instead")
	_ = cmd.MarkFlagDirname("dir")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		out := cmd.OutOrStdout()
		if *print {
			v31, _, err := openapi.Spec()
			if err != nil {
				return err
			}
			_, err = out.Write(v31)
			return err
		}
		if err := openapi.WriteSpec(*dir); err != nil {
			return err
		}
		for _, name := range []string{openapi.SpecFile31, openapi.SpecFile30} {
			fmt.Fprintln(out, "wrote", filepath.Join(*dir, name))
		}
		return nil
	}
	return cmd
}
