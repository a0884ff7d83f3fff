package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/ax-scheduler/ax/openapi"
)

func runOpenAPI(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("ax openapi", flag.ContinueOnError)
	dir := fs.String("dir", "openapi", "folder to write "+openapi.SpecFile31+" and "+openapi.SpecFile30+" to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := openapi.WriteSpec(*dir); err != nil {
		return err
	}
	for _, name := range []string{openapi.SpecFile31, openapi.SpecFile30} {
		fmt.Println("wrote", filepath.Join(*dir, name))
	}
	return nil
}
