package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
	"github.com/ax-scheduler/ax/queue"
)

// newKeyCommand manages API keys through the API with an admin key
// (AX_SERVER and AX_API_KEY), so an operator needs no database access.
// The first admin key is the server's AX_ADMIN_KEY (or `ax dev`'s dev key).
func newKeyCommand() *cobra.Command {
	return newGroupCommand("key", "Manage API keys (with an admin key): create, list, revoke, sign",
		newKeyCreateCommand(), newKeyListCommand(), newKeyRevokeCommand(), newKeySignCommand())
}

// apiKey is a key as the API shows it.
type apiKey struct {
	ID         uuid.UUID           `json:"id"`
	Name       string              `json:"name"`
	Prefix     string              `json:"prefix"`
	Scopes     []string            `json:"scopes"`
	Labels     map[string][]string `json:"labels,omitempty"`
	Groups     []string            `json:"groups,omitempty"`
	MintedBy   *uuid.UUID          `json:"minted_by,omitempty"`
	CreatedAt  time.Time           `json:"created_at"`
	LastUsedAt *time.Time          `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time          `json:"revoked_at,omitempty"`
	Secret     string              `json:"secret,omitempty"`
}

func newKeyCreateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "create --scope SCOPES", Short: "Create an API key; prints its secret (shown once)",
		Long: "Create an API key and print its secret on stdout (shown once; the rest goes to stderr).\n\n" +
			"Scopes: admin (everything), submit (create and run jobs, and read), read, agent (run tasks).",
		Args: noArgs,
	}
	af := addAPIFlags(cmd)
	scope := cmd.Flags().String("scope", "", "comma-separated scopes: "+strings.Join(queue.AllScopes, ", "))
	name := cmd.Flags().String("name", "", "what the key is for (default: key-SCOPES)")
	labels := cmd.Flags().String("labels", "", "agent keys: the only labels its agents may declare, k=v,k=v2 "+
		"(a label may be listed with several values); default: any")
	groups := cmd.Flags().String("groups", "", "limit the key to the jobs and runs of these job groups, g1,g2; default: all")
	_ = cmd.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions(queue.AllScopes, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *scope == "" {
			return usageErrorf("usage: %s (--scope is required)", cmd.UseLine())
		}
		req := map[string]any{"scopes": splitList(*scope)}
		if *name != "" {
			req["name"] = *name
		}
		if *labels != "" {
			l, err := queue.ParseKeyLabels(*labels)
			if err != nil {
				return usageErrorf("--labels: %v", err)
			}
			req["labels"] = l
		}
		if g := splitList(*groups); g != nil {
			req["groups"] = g
		}
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.CreateKeyWithBodyWithResponse(cmd.Context(), "application/json", bytes.NewReader(body))
		if err != nil {
			return unreachable(err)
		}
		if resp.StatusCode() != http.StatusCreated {
			return apiError(resp.StatusCode(), resp.Body)
		}
		var key apiKey
		if err := json.Unmarshal(resp.Body, &key); err != nil {
			return fmt.Errorf("error decoding the new key: %w", err)
		}
		return render(af.output, key, func() error {
			fmt.Fprintf(os.Stderr, "created key %s (%s) with scopes %s%s; it is shown once:\n",
				key.ID, key.Name, strings.Join(key.Scopes, ","), limitsText(key))
			fmt.Println(key.Secret)
			return nil
		})
	}
	return cmd
}

func newKeyListCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List API keys, revoked ones included", Args: noArgs}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		// Every key: the pages one after another, the largest the server
		// gives.
		var list struct {
			Keys []apiKey `json:"keys"`
		}
		pageSize := int64(1000)
		params := &client.ListKeysParams{Limit: &pageSize}
		for {
			resp, err := c.ListKeysWithResponse(cmd.Context(), params)
			if err != nil {
				return unreachable(err)
			}
			if resp.StatusCode() != http.StatusOK {
				return apiError(resp.StatusCode(), resp.Body)
			}
			var page struct {
				Keys       []apiKey `json:"keys"`
				NextCursor string   `json:"next_cursor"`
			}
			if err := json.Unmarshal(resp.Body, &page); err != nil {
				return fmt.Errorf("error decoding keys: %w", err)
			}
			list.Keys = append(list.Keys, page.Keys...)
			if page.NextCursor == "" {
				break
			}
			params.Cursor = &page.NextCursor
		}
		return render(af.output, nonNil(list.Keys), func() error {
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPREFIX\tSCOPES\tLIMITS\tCREATED\tSTATE")
			for _, k := range list.Keys {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked"
				}
				fmt.Fprintf(w, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, strings.Join(k.Scopes, ","),
					cmp.Or(strings.TrimPrefix(limitsText(k), " "), "-"), k.CreatedAt.UTC().Format("2006-01-02 15:04Z"), state)
			}
			return w.Flush()
		})
	}
	return cmd
}

func newKeyRevokeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "revoke ID", Short: "Revoke an API key (and the agent tokens it minted)", Args: exactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseKeyID(args[0])
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.RevokeKeyWithResponse(cmd.Context(), id)
		if err != nil {
			return unreachable(err)
		}
		if resp.StatusCode() != http.StatusNoContent {
			return apiError(resp.StatusCode(), resp.Body)
		}
		fmt.Println("revoked", id)
		return nil
	}
	return cmd
}

// newKeySignCommand makes a key for HMAC-signed requests acting for an API
// key, and prints its id and secret (shown once).
func newKeySignCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "sign API_KEY_ID", Short: "Create a signing key for HMAC-signed requests acting for an API key", Args: exactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		apiKeyID, err := parseKeyID(args[0])
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.CreateSigningKeyWithResponse(cmd.Context(), apiKeyID)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON201 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		k := resp.JSON201
		return render(af.output, k, func() error {
			fmt.Fprintf(os.Stderr, "created signing key for api key %s; send its id as Ax-Key-Id; the secret is shown once:\n", apiKeyID)
			fmt.Println(k.Id)
			fmt.Println(k.Secret)
			return nil
		})
	}
	return cmd
}

func parseKeyID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageErrorf("key id %q is not a UUID (`ax key list` shows them)", s)
	}
	return id, nil
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
func limitsText(k apiKey) string {
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
