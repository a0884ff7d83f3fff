package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
)

// runKey manages API keys directly in the database: it is the operator's
// way in before any key exists.
func runKey(ctx context.Context, args []string) error {
	pool, args, err := openDatabase(ctx, "ax key", args)
	if err != nil {
		return err
	}
	defer pool.Close()
	return subcommand(ctx, "key", args, map[string]func(context.Context, []string) error{
		"create": func(ctx context.Context, args []string) error {
			fs := flag.NewFlagSet("ax key create", flag.ContinueOnError)
			scope := fs.String("scope", "", "comma-separated scopes: "+strings.Join(openapi.AllScopes, ", "))
			name := fs.String("name", "", "what the key is for")
			if err := fs.Parse(args); err != nil {
				return err
			}
			if *name == "" {
				*name = "key-" + *scope
			}
			secret, key, err := openapi.CreateAPIKey(ctx, pool, *name, splitList(*scope))
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "created key %s (%s) with scopes %s; it is shown once:\n",
				key.ID, key.Name, strings.Join(key.Scopes, ","))
			fmt.Println(secret)
			return nil
		},
		"list": func(ctx context.Context, _ []string) error {
			keys, err := db.APIKeyList(ctx, pool)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPREFIX\tSCOPES\tCREATED\tSTATE")
			for _, k := range keys {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked"
				}
				fmt.Fprintf(w, "%s\t%s\t%s…\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix,
					strings.Join(k.Scopes, ","), k.CreatedAt.UTC().Format("2006-01-02 15:04Z"), state)
			}
			return w.Flush()
		},
		"sign": func(ctx context.Context, args []string) error { return createSigningKey(ctx, pool, args) },
		"revoke": func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return errors.New("usage: ax key revoke ID")
			}
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("key id %q is not a UUID", args[0])
			}
			if err := db.APIKeyRevoke(ctx, pool, id); err != nil {
				return err
			}
			fmt.Println("revoked", id)
			return nil
		},
	})
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
