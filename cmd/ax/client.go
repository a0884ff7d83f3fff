package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// errNoAPIKey says how to get a key; exit 6 like a refused one.
var errNoAPIKey = errors.New("no API key: set AX_API_KEY or --key (an admin makes one with `ax key create`)")

// apiFlags are the flags every API command takes.
type apiFlags struct {
	server string
	key    string
	output outputFormat
}

// addAPIFlags registers --server, --key and -o on cmd.
func addAPIFlags(cmd *cobra.Command) *apiFlags {
	f := &apiFlags{output: "table"}
	fs := cmd.Flags()
	fs.StringVar(&f.server, "server", envOr("AX_SERVER", "http://127.0.0.1:8080"), "ax server URL (AX_SERVER)")
	// No default from the environment here: -h prints defaults, and a
	// key must not land on a terminal or in a log; client() reads it.
	fs.StringVar(&f.key, "key", "", "API key (default: AX_API_KEY)")
	fs.VarP(&f.output, "output", "o", "output: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	return f
}

func (f *apiFlags) client() (*client.ClientWithResponses, error) {
	f.key = cmp.Or(f.key, envOr("AX_API_KEY", ""))
	if f.key == "" {
		return nil, errNoAPIKey
	}
	auth := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+f.key)
		return nil
	}
	return client.NewClientWithResponses(strings.TrimRight(f.server, "/"),
		client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
		client.WithRequestEditorFn(auth))
}

// apiErr is a non-2xx answer: its status decides the exit code.
type apiErr struct {
	status int
	msg    string
}

func (e *apiErr) Error() string { return e.msg }

// httpToFlag names the CLI flags for the HTTP parameters the server's
// messages mention: a person at a terminal types the flag.
var httpToFlag = strings.NewReplacer("?force=true", "--force", "query.force", "--force",
	"; adopt takes it over", "; --adopt takes it over", "; force takes it over", "; --force takes it over")

// apiError turns a non-2xx answer into an error that shows the problem
// document's title and each field error.
func apiError(status int, body []byte) error {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Errors []struct {
			Location string `json:"location"`
			Message  string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &p) != nil || (p.Title == "" && p.Detail == "") {
		return &apiErr{status: status, msg: fmt.Sprintf("server answered %d: %s", status, strings.TrimSpace(string(body)))}
	}
	msg := fmt.Sprintf("%d %s", status, p.Title)
	if p.Detail != "" && p.Detail != p.Title {
		msg += ": " + p.Detail
	}
	for _, e := range p.Errors {
		msg += fmt.Sprintf("\n  %s: %s", e.Location, e.Message)
	}
	return &apiErr{status: status, msg: httpToFlag.Replace(msg)}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
