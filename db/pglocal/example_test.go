package pglocal_test

import (
	"context"
	"log"
	"os"
	"os/exec"

	"github.com/ax-scheduler/ax/db/pglocal"
)

// ExampleFind runs a command against whatever server Find comes up with.
func ExampleFind() {
	ctx := context.Background()
	srv, err := pglocal.Find(ctx, pglocal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	cmd := exec.CommandContext(ctx, "ax", "migrate")
	cmd.Env = append(os.Environ(), srv.Env()...)
	if err := cmd.Run(); err != nil {
		log.Print(err)
	}
}
