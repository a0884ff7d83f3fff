package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// runKey manages API keys directly in the database: it is the operator's
// way in before any key exists.
func runKey(ctx context.Context, args []string) error {
	pool, args, err := openDatabase(ctx, "ax key", args)
	if err != nil {
		return err
	}
	if pool != nil {
		defer pool.Close()
	}
	return subcommand(ctx, "key", args, map[string]func(context.Context, []string) error{
		"create": func(ctx context.Context, args []string) error {
			fs := flag.NewFlagSet("ax key create", flag.ContinueOnError)
			scope := fs.String("scope", "", "comma-separated scopes: "+strings.Join(queue.AllScopes, ", "))
			name := fs.String("name", "", "what the key is for")
			labels := fs.String("labels", "", "agent keys: the only labels its agents may declare, k=v,k=v2 "+
				"(a label may be listed with several values); default: any")
			groups := fs.String("groups", "", "limit the key to the jobs and runs of these job groups, g1,g2; default: all")
			if err := fs.Parse(args); err != nil {
				return err
			}
			if *name == "" {
				*name = "key-" + *scope
			}
			var limits queue.KeyLimits
			var err error
			if limits.Labels, err = queue.ParseKeyLabels(*labels); err != nil {
				return err
			}
			limits.Groups = splitList(*groups)
			secret, key, err := queue.NewKeyService(pool).Create(ctx, *name, splitList(*scope), limits)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "created key %s (%s) with scopes %s%s; it is shown once:\n",
				key.ID, key.Name, strings.Join(key.Scopes, ","), limitsText(key))
			fmt.Println(secret)
			return nil
		},
		"list": func(ctx context.Context, args []string) error {
			if err := parseNoFlags("ax key list", args); err != nil {
				return err
			}
			keys, err := db.APIKeyList(ctx, pool)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPREFIX\tSCOPES\tLIMITS\tCREATED\tSTATE")
			for _, k := range keys {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked"
				}
				fmt.Fprintf(w, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, strings.Join(k.Scopes, ","),
					cmp.Or(strings.TrimPrefix(limitsText(k), " "), "-"), k.CreatedAt.UTC().Format("2006-01-02 15:04Z"), state)
			}
			return w.Flush()
		},
		"sign": func(ctx context.Context, args []string) error { return createSigningKey(ctx, pool, args) },
		"revoke": func(ctx context.Context, args []string) error {
			fs := flag.NewFlagSet("ax key revoke ID", flag.ContinueOnError)
			if err := fs.Parse(args); err != nil {
				return err
			}
			if args = fs.Args(); len(args) != 1 {
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

// limitsText describes a key's label binding, groups and minter, with a
// leading space; "" when it has none.
func limitsText(k *axtype.APIKey) string {
	var parts []string
	if k.Labels != nil {
		var labels []string
		for _, name := range slices.Sorted(maps.Keys(k.Labels)) {
			for _, v := range k.Labels[name] {
				labels = append(labels, name+"="+v)
			}
		}
		parts = append(parts, "labels "+strings.Join(labels, ","))
	}
	if k.Groups != nil {
		parts = append(parts, "groups "+strings.Join(k.Groups, ","))
	}
	if k.MintedBy != nil {
		parts = append(parts, "minted by "+k.MintedBy.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, "; ")
}
