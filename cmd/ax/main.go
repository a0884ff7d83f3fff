// Command ax is the ax server and CLI: `ax serve` runs a replica, the
// other commands migrate, generate the spec, manage keys and call the API.
//
// The commands are built with cobra rather than the standard flag package:
// it generates shell completions (`ax completion bash|zsh|fish`), gives
// every command the same help and -h, takes flags before or after
// arguments, and lists a group's subcommands from one definition, so help
// texts cannot name commands that do not exist.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/speccmd"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ax:", err)
	}
	os.Exit(exitCode(err))
}

// run executes the command line args.
func run(ctx context.Context, args []string) error {
	root := newRootCommand()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "ax",
		Short: "ax is a distributed job scheduler whose state lives in PostgreSQL",
		Long: "ax is a distributed job scheduler whose state lives in PostgreSQL.\n\n" +
			"`ax serve` runs a server replica, `ax dev` one with a local Postgres; the other commands\n" +
			"call the API at AX_SERVER (--server) with the key in AX_API_KEY (--key).\n\n" +
			"Exit codes: 0 ok, 1 other error, 2 usage, 3 not found, 4 conflict, 5 server error or\n" +
			"unreachable, 6 not allowed (401/403), 7 rejected input (400/422).",
		Version:           version,
		SilenceErrors:     true, // main prints the error once
		SilenceUsage:      true, // an API error is not a usage error
		Args:              noArgs,
		RunE:              func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetVersionTemplate("ax {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.AddGroup(&cobra.Group{ID: "api", Title: "Commands that call the API:"},
		&cobra.Group{ID: "server", Title: "Commands that run or prepare a server:"})
	for _, c := range []*cobra.Command{newJobCommand(), newExecCommand(), newApplyCommand(), newClassCommand(), newCalendarCommand(), newKeyCommand()} {
		c.GroupID = "api"
		root.AddCommand(c)
	}
	spec := speccmd.Command() // the program make generate runs as openapi/specgen
	spec.Args = noArgs
	for _, c := range []*cobra.Command{newServeCommand(), newDevCommand(), newMigrateCommand(), newMaintainCommand(), spec} {
		c.GroupID = "server"
		root.AddCommand(c)
	}
	root.AddCommand(&cobra.Command{
		Use: "version", Short: "Print the version", Args: noArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version) },
	})
	return root
}

// newGroupCommand makes a command that only holds subcommands: alone it
// prints its help; with an unknown subcommand it is a usage error.
func newGroupCommand(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use: use, Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q (see `%s -h`)", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(subs...)
	return c
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usageErrorf("unknown command %q for %q (see `%s -h`)", args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return usageErrorf("%s takes no arguments", cmd.CommandPath())
	}
	return nil
}

// exactArgs wants n arguments, named in the command's Use line.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// minArgs wants at least n arguments.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
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

// errorsAs is errors.As returning the target.
func errorsAs[T error](err error) (T, bool) {
	var target T
	ok := errors.As(err, &target)
	return target, ok
}
