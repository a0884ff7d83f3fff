// Command specgen writes the OpenAPI specs (3.1 and its 3.0 downgrade) to
// a folder. make generate runs it before building anything else, because
// the Go client, and so cmd/ax, are generated from its output: building
// ax to write the spec would need the client of the spec not yet written.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ax-scheduler/ax/openapi"
)

func main() {
	dir := flag.String("dir", "openapi", "folder to write "+openapi.SpecFile31+" and "+openapi.SpecFile30+" to")
	flag.Parse()
	if err := openapi.WriteSpec(*dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{openapi.SpecFile31, openapi.SpecFile30} {
		fmt.Println("wrote", filepath.Join(*dir, name))
	}
}
