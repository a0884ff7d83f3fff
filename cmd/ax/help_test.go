package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// allCommands lists root and every command under it.
func allCommands(root *cobra.Command) []*cobra.Command {
	cmds := []*cobra.Command{root}
	for _, c := range root.Commands() {
		cmds = append(cmds, allCommands(c)...)
	}
	return cmds
}

// execute runs ax with args and returns its stdout and error.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// -h exits 0 on every command and needs no database, server or key.
func TestHelpEverywhere(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("AX_API_KEY", "")
	for _, c := range allCommands(newRootCommand()) {
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "ax")), "-h")
		out, err := execute(t, args...)
		require.NoError(t, err, "%v", args)
		require.Equal(t, exitOK, exitCode(err))
		require.Contains(t, out, "Usage:", "%v", args)
	}
}

// Help texts name only commands that exist: every `ax WORD…` in a
// command's help resolves to a command.
func TestHelpNamesOnlyCommandsThatExist(t *testing.T) {
	root := newRootCommand()
	mention := regexp.MustCompile("`ax ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)*)")
	for _, c := range allCommands(root) {
		text := c.Short + "\n" + c.Long + "\n" + c.Flags().FlagUsages()
		for _, m := range mention.FindAllStringSubmatch(text, -1) {
			words := strings.Fields(m[1])
			found, rest, err := root.Find(words)
			require.NoError(t, err, "%s names `ax %s`", c.CommandPath(), m[1])
			// Words left over are arguments, never a missing subcommand.
			require.False(t, found.HasSubCommands() && len(rest) > 0,
				"%s names `ax %s`, which is no command", c.CommandPath(), m[1])
		}
		for _, line := range strings.Split(c.Flags().FlagUsages(), "\n") {
			if i := strings.Index(line, "ax "); i >= 0 && strings.Contains(line, ": ax ") {
				words := strings.Fields(line[i+3:])
				found, _, err := root.Find(words[:min(2, len(words))])
				require.NoError(t, err, line)
				require.NotEqual(t, root, found, line)
			}
		}
	}
}

// Each class of error exits with its own code.
func TestExitCodes(t *testing.T) {
	t.Setenv("AX_API_KEY", "")
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"bogus"}, exitUsage},
		{[]string{"job", "bogus"}, exitUsage},
		{[]string{"job", "get"}, exitUsage},
		{[]string{"job", "list", "--no-such-flag"}, exitUsage},
		{[]string{"job", "list", "-o", "xml"}, exitUsage},
		{[]string{"exec", "get", "not-a-uuid"}, exitUsage},
		{[]string{"job", "list"}, exitDenied}, // no key
	} {
		_, err := execute(t, tt.args...)
		require.Error(t, err, "%v", tt.args)
		require.Equal(t, tt.code, exitCode(err), "%v: %v", tt.args, err)
	}
	for status, code := range map[int]int{404: exitNotFound, 409: exitConflict, 412: exitConflict, 500: exitServer,
		503: exitServer, 401: exitDenied, 403: exitDenied, 422: exitRejected, 400: exitRejected} {
		require.Equal(t, code, exitCode(apiError(status, []byte(`{"title":"x"}`))), "%d", status)
	}
}

// --version and `ax version` print the version.
func TestVersion(t *testing.T) {
	out, err := execute(t, "--version")
	require.NoError(t, err)
	require.Equal(t, "ax "+version+"\n", out)
}

// The server's messages name CLI flags, not HTTP parameters.
func TestAPIErrorNamesFlags(t *testing.T) {
	err := apiError(409, []byte(`{"title":"job x is managed by file:a.yaml: change it where it is declared, or pass ?force=true to change it anyway"}`))
	require.Contains(t, err.Error(), "--force")
	require.NotContains(t, err.Error(), "?force=true")
}

// `ax completion bash`, sourced by bash, completes `ax job ` with the job
// commands: bash runs the generated __start_ax as it would on TAB.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	ax := filepath.Join(dir, "ax")
	build := exec.Command("go", "build", "-o", ax, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	script, err := exec.Command(ax, "completion", "bash").Output()
	require.NoError(t, err)
	scriptFile := filepath.Join(dir, "ax.bash")
	require.NoError(t, os.WriteFile(scriptFile, script, 0o644))

	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		cword := len(words)
		if !strings.HasSuffix(line, " ") {
			cword--
		}
		// The script calls _get_comp_words_by_ref of the bash-completion
		// package; where that is not installed, a minimal one reads the
		// words bash hands a completion function.
		// compopt only works inside a real TAB press: here it may only
		// tune spacing, so it is stubbed.
		driver := `compopt() { :; }
if [[ -r /usr/share/bash-completion/bash_completion ]]; then
  source /usr/share/bash-completion/bash_completion
else
  _get_comp_words_by_ref() {
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
  }
fi
source "$SCRIPT"
COMP_LINE="$LINE"; COMP_POINT=${#COMP_LINE}
read -r -a COMP_WORDS <<<"$LINE"
[[ "$LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$CWORD
__start_ax
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", driver)
		cmd.Env = append(os.Environ(), "SCRIPT="+scriptFile, "LINE="+line, "CWORD="+strconv.Itoa(cword),
			"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "AX_API_KEY=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.Fields(string(out))
	}
	got := complete("ax job ")
	for _, want := range []string{"create", "list", "get", "trigger", "pause", "resume", "delete", "why"} {
		require.Contains(t, got, want)
	}
	require.Equal(t, []string{"trigger"}, complete("ax job tr"))
	require.Contains(t, complete("ax exec list -o "), "yaml")
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

// A command's -h shows no API key: the flag's default is not taken from
// AX_API_KEY (client() reads it when the command runs).
func TestHelpShowsNoAPIKey(t *testing.T) {
	const secret = "ax_live_do_not_print_me"
	t.Setenv("AX_API_KEY", secret)
	out, err := execute(t, "exec", "list", "-h")
	require.NoError(t, err)
	require.Contains(t, out, "AX_API_KEY")
	require.NotContains(t, out, secret)
}
