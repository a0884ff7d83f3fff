package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ax-scheduler/ax/openapi"
)

// Spec file names under the openapi folder; the client is generated from
// the 3.0 one.
const (
	specFile31 = "openapi.yaml"
	specFile30 = "openapi-3.0.yaml"
)

func runOpenAPI(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("ax openapi", flag.ContinueOnError)
	dir := fs.String("dir", "openapi", "folder to write "+specFile31+" and "+specFile30+" to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v31, v30, err := openapi.Spec()
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{specFile31: v31, specFile30: v30} {
		path := filepath.Join(*dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("error writing %s: %w", path, err)
		}
		fmt.Println("wrote", path)
	}
	return nil
}
