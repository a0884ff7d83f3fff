package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi"
)

func newOpenAPICommand() *cobra.Command {
	cmd := &cobra.Command{Use: "openapi", Short: "Write the OpenAPI 3.1 spec and its 3.0 downgrade", Args: noArgs}
	dir := cmd.Flags().String("dir", "openapi", "folder to write "+openapi.SpecFile31+" and "+openapi.SpecFile30+" to")
	_ = cmd.MarkFlagDirname("dir")
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := openapi.WriteSpec(*dir); err != nil {
			return err
		}
		for _, name := range []string{openapi.SpecFile31, openapi.SpecFile30} {
			fmt.Println("wrote", filepath.Join(*dir, name))
		}
		return nil
	}
	return cmd
}
