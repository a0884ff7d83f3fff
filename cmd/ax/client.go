package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
)

// apiFlags are the flags every API command takes.
type apiFlags struct {
	server string
	key    string
	output string
	// yaml lets -o be yaml too (the job commands: what they print,
	// ax apply takes back).
	yaml bool
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", envOr("AX_SERVER", "http://127.0.0.1:8080"), "ax server URL (AX_SERVER)")
	// No default from the environment here: -h prints defaults, and a
	// key must not land on a terminal or in a log; client() reads it.
	fs.StringVar(&f.key, "key", "", "API key (default: AX_API_KEY)")
	outputs := "table or json"
	if f.yaml {
		outputs = "table, json or yaml (which ax apply takes back)"
	}
	fs.StringVar(&f.output, "o", "table", "output: "+outputs)
}

func (f *apiFlags) client() (*client.ClientWithResponses, error) {
	f.key = cmp.Or(f.key, envOr("AX_API_KEY", ""))
	if f.key == "" {
		return nil, fmt.Errorf("no API key: set AX_API_KEY or --key (`ax key create` makes one)")
	}
	if f.output != "table" && f.output != "json" && !(f.yaml && f.output == "yaml") {
		if f.yaml {
			return nil, fmt.Errorf("-o must be table, json or yaml, not %q", f.output)
		}
		return nil, fmt.Errorf("-o must be table or json, not %q", f.output)
	}
	auth := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+f.key)
		return nil
	}
	return client.NewClientWithResponses(strings.TrimRight(f.server, "/"),
		client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
		client.WithRequestEditorFn(auth))
}

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
		return fmt.Errorf("server answered %d: %s", status, strings.TrimSpace(string(body)))
	}
	msg := fmt.Sprintf("%d %s", status, p.Title)
	if p.Detail != "" && p.Detail != p.Title {
		msg += ": " + p.Detail
	}
	for _, e := range p.Errors {
		msg += fmt.Sprintf("\n  %s: %s", e.Location, e.Message)
	}
	return fmt.Errorf("%s", msg)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// idCommand parses the flags of a command that takes one id (flags may
// come after it) and returns the id, the API flags and a client.
func idCommand(name, what string, args []string, flags ...func(*flag.FlagSet)) (uuid.UUID, *apiFlags, *client.ClientWithResponses, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	af := &apiFlags{yaml: what == "job"}
	af.register(fs)
	for _, register := range flags {
		register(fs)
	}
	if err := parseInterspersed(fs, args); err != nil {
		return uuid.Nil, nil, nil, err
	}
	if fs.NArg() != 1 {
		return uuid.Nil, nil, nil, fmt.Errorf("usage: %s ID", name)
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return uuid.Nil, nil, nil, fmt.Errorf("%s id %q is not a UUID", what, fs.Arg(0))
	}
	c, err := af.client()
	return id, af, c, err
}
