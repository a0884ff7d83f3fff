package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Help needs nothing: `ax GROUP -h` lists the group's commands, and a
// command's -h prints its flags without a database or an API key.
func TestHelpNeedsNoDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{{"job", "-h"}, {"key", "help"}, {"migrate", "help"}} {
		require.NoError(t, run(context.Background(), args), args)
	}
	for _, args := range [][]string{
		{"key", "create", "-h"}, {"key", "list", "-h"}, {"key", "revoke", "-h"}, {"key", "sign", "-h"},
		{"migrate", "status", "-h"}, {"migrate", "up", "-h"}, {"migrate", "--help"},
	} {
		err := run(context.Background(), args)
		require.True(t, errors.Is(err, flag.ErrHelp), "%v: %v", args, err)
	}
	// Without help, a database is still required.
	err := run(context.Background(), []string{"key", "list"})
	require.ErrorContains(t, err, "no database")
}

// A command's -h shows no API key: the flag's default is not taken from
// AX_API_KEY (client() reads it when the command runs).
func TestHelpShowsNoAPIKey(t *testing.T) {
	const secret = "ax_live_do_not_print_me"
	t.Setenv("AX_API_KEY", secret)
	var f apiFlags
	fs := flag.NewFlagSet("ax exec list", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	f.register(fs)
	require.ErrorIs(t, fs.Parse([]string{"-h"}), flag.ErrHelp)
	require.Contains(t, out.String(), "AX_API_KEY")
	require.False(t, strings.Contains(out.String(), secret), out.String())

	require.NoError(t, fs.Parse(nil))
	_, err := f.client()
	require.NoError(t, err)
	require.Equal(t, secret, f.key, "the key comes from AX_API_KEY when the command runs")
}

// `ax dev` logs text; `ax serve` logs JSON unless stderr is a terminal;
// AX_LOG_FORMAT decides over both.
func TestLogFormat(t *testing.T) {
	for _, tt := range []struct {
		env  string
		dev  bool
		text bool
	}{
		{env: "", dev: true, text: true},
		{env: "", dev: false, text: isTerminal(os.Stderr)},
		{env: "json", dev: true, text: false},
		{env: "text", dev: false, text: true},
	} {
		t.Setenv("AX_LOG_FORMAT", tt.env)
		_, isText := newLogger(tt.dev).Handler().(*slog.TextHandler)
		require.Equal(t, tt.text, isText, "AX_LOG_FORMAT=%q dev=%v", tt.env, tt.dev)
	}
}
