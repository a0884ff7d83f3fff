// Command ax is the ax server and CLI: `ax serve` runs a replica, the
// other commands migrate, generate the spec, manage keys and call the API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":   {"run an ax server replica", runServe},
		"migrate": {"apply or inspect schema migrations: up | down | status", runMigrate},
		"openapi": {"write the OpenAPI 3.1 spec and its 3.0 downgrade", runOpenAPI},
		"key":     {"manage API keys: create | list | revoke | sign (a key for HMAC-signed requests)", runKey},
		"dev":     {"run ax with a local Postgres; `ax dev exec -- CMD` runs CMD with DATABASE_URL set", runDev},
		"job":     {"call the job API: create | list | get | trigger | pause | resume | delete | why | backfill", runJob},
		"exec":    {"call the execution API: list | get | cancel | cancel-key | logs [-f] | rerun", runExec},
		"apply":   {"declare the jobs of a YAML or JSON file (-f FILE [--dry-run] [--prune])", runApply},
		"class":   {"manage rate classes: create | update | list | get | degrade | restore | delete", runClass},
		"version": {"print the version", func(context.Context, []string) error { fmt.Println(version); return nil }},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "ax:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(os.Stdout, cmds)
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage(os.Stderr, cmds)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd.run(ctx, args[1:])
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: ax COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun `ax COMMAND -h` for a command's flags.")
}

// newLogger logs to stderr at the level in AX_LOG_LEVEL (default info), as
// JSON or as text (key=value lines for a person reading a terminal): the
// format in AX_LOG_FORMAT when set, else text when stderr is a terminal
// or text is true (`ax dev`), else JSON (a service's log collector).
func newLogger(text bool) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(envOr("AX_LOG_LEVEL", "info"))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	switch envOr("AX_LOG_FORMAT", "") {
	case "json":
		text = false
	case "text":
		text = true
	default:
		text = text || isTerminal(os.Stderr)
	}
	if text {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// isTerminal reports whether f is a character device (a terminal, not a
// file or a pipe).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func envOr(name, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return fallback
}

// subcommand dispatches the first argument to one of subs.
func subcommand(ctx context.Context, group string, args []string, subs map[string]func(context.Context, []string) error) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		return fmt.Errorf("usage: ax %s %s", group, strings.Join(names, "|"))
	}
	if isHelp(args[0]) {
		fmt.Printf("usage: ax %s %s [flags]\n\nRun `ax %s COMMAND -h` for a command's flags.\n",
			group, strings.Join(names, "|"), group)
		return nil
	}
	fn, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("unknown command `ax %s %s`: use one of %s", group, args[0], strings.Join(names, ", "))
	}
	return fn(ctx, args[1:])
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// wantsHelp reports whether any of args asks for help: such a command
// prints its usage and needs no database or server.
func wantsHelp(args []string) bool {
	return slices.ContainsFunc(args, isHelp)
}

// parseInterspersed parses flags that come before or after positional
// arguments (`ax job get ID -o json`), which flag.Parse alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}
