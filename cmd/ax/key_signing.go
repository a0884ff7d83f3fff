package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue"
)

// createSigningKey makes a key for HMAC-signed requests acting for the API
// key named in args, and prints its id and secret (shown once).
func createSigningKey(ctx context.Context, pool *pgxpool.Pool, args []string) error {
	fs := flag.NewFlagSet("ax key sign API_KEY_ID", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if args = fs.Args(); len(args) != 1 {
		return errors.New("usage: ax key sign API_KEY_ID")
	}
	apiKeyID, err := uuid.Parse(args[0])
	if err != nil {
		return fmt.Errorf("api key id %q is not a UUID", args[0])
	}
	id, secret, err := queue.NewSigningKeyService(pool).Create(ctx, apiKeyID)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created signing key for api key %s; send its id as Ax-Key-Id; the secret is shown once:\n", apiKeyID)
	fmt.Println(id)
	fmt.Println(secret)
	return nil
}
