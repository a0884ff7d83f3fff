package pglocal

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Files in a cluster's folder.
const (
	dataDir   = "data"         // PGDATA
	runDir    = "run"          // unix socket, for psql -h DIR/run
	logFile   = "postgres.log" // server log, appended by every start
	readyFile = "initialized"  // written once data/ is complete, so a half-made one is redone
	ownerFile = "owner.pid"    // pid of the process using a temp folder, for the sweep
)

// tempPrefix names temp folders, kept short because a unix socket path must
// fit in about 104 bytes.
const tempPrefix = "axpg-"

// maxSocketPath is the longest unix socket path every platform accepts
// (sun_path is 104 bytes on macOS, 108 on Linux, both counting a NUL).
const maxSocketPath = 103

// startAttempts bounds retries when another process takes the free port
// between freePort and the server binding it.
const startAttempts = 3

// Shutdown modes of pg_ctl stop.
const (
	stopFast      = "fast"      // roll back sessions, then shut down cleanly
	stopImmediate = "immediate" // kill at once; fine for data being thrown away
)

// settings make the server fast and unsafe: a throwaway cluster does not need
// to survive a power cut. They go into postgresql.conf, so a kept cluster
// started by hand with pg_ctl behaves the same.
const settings = `
# Added by ax (db/pglocal): a development server, fast and not crash-safe.
listen_addresses = '127.0.0.1'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 500
shared_buffers = 128MB
`

// cluster is a PostgreSQL cluster in a folder, run with the binaries in bin
// as the OS user cred (nil: the current user).
type cluster struct {
	dir    string
	bin    string
	cred   *syscall.Credential
	logger *slog.Logger
	port   int // set once started
}

// start starts a cluster as Options say, cleaning up after itself on error.
func start(ctx context.Context, opts Options, logger *slog.Logger) (*Server, error) {
	began := time.Now()
	bin, err := cmp.Or(opts.search, defaultSearch()).find(ctx)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, cred: cred, logger: logger}
	sweep(ctx, c)
	temp := opts.Dir == ""
	if err := c.makeDir(opts.Dir); err != nil {
		return nil, err
	}
	port, err := c.setUp(ctx, temp)
	if err != nil {
		return nil, errors.Join(err, c.abandon(temp))
	}
	logger.InfoContext(ctx, "started PostgreSQL",
		"dir", c.dir, "port", port, "bin", bin, "elapsed", time.Since(began).Round(time.Millisecond))
	return &Server{URL: clusterURL(port), Source: SourceStarted, Dir: c.dir, cluster: c, keep: opts.Keep, temp: temp}, nil
}

func clusterURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func (c *cluster) path(name string) string {
	return filepath.Join(c.dir, name)
}

// makeDir creates the cluster's folder, a temp one when dir is empty.
func (c *cluster) makeDir(dir string) error {
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", tempPrefix)
	} else {
		dir, err = filepath.Abs(dir) // commands run in the folder, so paths must not be relative
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
	}
	if err != nil {
		return fmt.Errorf("error creating cluster folder: %w", err)
	}
	c.dir = dir
	return nil
}

// chown gives file to the server's user, who must write in it.
func (c *cluster) chown(file string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(file, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("error handing %s to user %s: %w", file, serverUser, err)
	}
	return nil
}

// setUp makes the cluster if needed and starts it, returning its port.
func (c *cluster) setUp(ctx context.Context, temp bool) (int, error) {
	if err := c.chown(c.dir); err != nil {
		return 0, err
	}
	if temp {
		if err := c.own(); err != nil {
			return 0, err
		}
	}
	if err := c.ensureInitialized(ctx); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(c.path(runDir), 0o700); err != nil {
		return 0, fmt.Errorf("error creating socket folder: %w", err)
	}
	if err := c.chown(c.path(runDir)); err != nil {
		return 0, err
	}
	port, err := c.startOnFreePort(ctx)
	if err != nil {
		return 0, err
	}
	if err := ping(ctx, clusterURL(port), 10*time.Second); err != nil {
		return 0, fmt.Errorf("error connecting to started server: %w", err)
	}
	return port, nil
}

// own records this process as the user of the folder, so that the sweep of a
// later run removes the folder if this process dies without Stop.
func (c *cluster) own() error {
	err := os.WriteFile(c.path(ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err != nil {
		return fmt.Errorf("error writing owner file: %w", err)
	}
	return nil
}

// disown undoes own, for a folder kept on purpose.
func (c *cluster) disown() error {
	if err := os.Remove(c.path(ownerFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("error removing owner file: %w", err)
	}
	return nil
}

// ensureInitialized reuses a complete cluster, stopping its server if a
// crashed run left it running, and otherwise makes it again from scratch.
func (c *cluster) ensureInitialized(ctx context.Context) error {
	if _, err := os.Stat(c.path(readyFile)); err == nil {
		c.logger.InfoContext(ctx, "reusing PostgreSQL cluster", "dir", c.dir)
		return c.stop(stopFast)
	}
	if err := os.RemoveAll(c.path(dataDir)); err != nil {
		return fmt.Errorf("error removing half-made cluster: %w", err)
	}
	if err := c.initdb(ctx); err != nil {
		return err
	}
	if err := c.configure(); err != nil {
		return err
	}
	if err := os.WriteFile(c.path(readyFile), nil, 0o644); err != nil {
		return fmt.Errorf("error marking cluster initialized: %w", err)
	}
	return nil
}

func (c *cluster) initdb(ctx context.Context) error {
	err := c.run(ctx, "initdb", "-D", c.path(dataDir), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if err != nil && c.cred != nil {
		return fmt.Errorf("%w (running as root: user %s must be able to reach %s)", err, serverUser, c.dir)
	}
	return err
}

func (c *cluster) configure() error {
	f, err := os.OpenFile(c.path(filepath.Join(dataDir, "postgresql.conf")), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("error opening postgresql.conf: %w", err)
	}
	_, err = f.WriteString(settings)
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("error writing postgresql.conf: %w", err)
	}
	return nil
}

// errPortTaken means the server could not bind the port it was given.
var errPortTaken = errors.New("port taken")

// startOnFreePort starts the server on a free port, trying another port when
// a different process takes the first one in the meantime.
func (c *cluster) startOnFreePort(ctx context.Context) (int, error) {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		err = c.startOn(ctx, port)
		if err == nil {
			c.port = port
			return port, nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return 0, err
		}
		c.logger.WarnContext(ctx, "PostgreSQL port taken, retrying", "port", port, "error", err)
	}
}

// freePort returns a TCP port that nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("error finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) startOn(ctx context.Context, port int) error {
	logged := fileSize(c.path(logFile))
	options := fmt.Sprintf("-p %d -k %s", port, shellQuote(c.socketDir()))
	err := c.run(ctx, "pg_ctl", "start", "-w", "-D", c.path(dataDir), "-l", c.path(logFile), "-o", options)
	if err == nil {
		return nil
	}
	tail := c.logSince(logged)
	if strings.Contains(tail, "already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return fmt.Errorf("%w\nserver log:\n%s", err, tail)
}

// socketDir returns where the server puts its unix socket, or "" (none) when
// the folder's path is too long for one; ax connects over TCP anyway.
func (c *cluster) socketDir() string {
	dir := c.path(runDir)
	if len(filepath.Join(dir, ".s.PGSQL.65535")) > maxSocketPath {
		c.logger.Warn("cluster folder too long for a unix socket, listening on TCP only", "dir", c.dir)
		return ""
	}
	return dir
}

// shellQuote quotes s for the shell that pg_ctl runs postgres with.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fileSize(file string) int64 {
	info, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return info.Size()
}

// logSince returns the end of what the server logged after offset, which
// says why it did not start.
func (c *cluster) logSince(offset int64) string {
	const maxTail = 4096
	f, err := os.Open(c.path(logFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	offset = max(offset, fileSize(c.path(logFile))-maxTail)
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, maxTail))
	return string(bytes.TrimSpace(b))
}

// running reports whether a server runs on the cluster's data.
func (c *cluster) running() bool {
	if _, err := os.Stat(c.path(filepath.Join(dataDir, "postmaster.pid"))); err != nil {
		return false // spares a pg_ctl run in the common case
	}
	return c.run(context.Background(), "pg_ctl", "status", "-D", c.path(dataDir)) == nil
}

// stop stops the server if it runs. pg_ctl gives up after 60 seconds, so stop
// needs no context.
func (c *cluster) stop(mode string) error {
	if !c.running() {
		return nil
	}
	c.logger.Info("stopping PostgreSQL", "dir", c.dir, "mode", mode)
	return c.run(context.Background(), "pg_ctl", "stop", "-w", "-m", mode, "-D", c.path(dataDir))
}

// remove deletes the cluster's files. A folder given by the caller may hold
// other files, so only ours go, and the folder itself only if then empty.
func (c *cluster) remove(temp bool) error {
	c.logger.Info("removing PostgreSQL cluster", "dir", c.dir)
	if temp {
		return os.RemoveAll(c.dir)
	}
	var errs []error
	for _, name := range []string{dataDir, runDir, logFile, readyFile, ownerFile} {
		errs = append(errs, os.RemoveAll(c.path(name)))
	}
	_ = os.Remove(c.dir) // fails when not empty, as wanted
	return errors.Join(errs...)
}

// abandon cleans up after a failed start. A caller's folder is kept with its
// log for a look.
func (c *cluster) abandon(temp bool) error {
	err := c.stop(stopImmediate)
	if temp {
		err = errors.Join(err, c.remove(true))
	}
	return err
}

// run runs one of the PostgreSQL binaries in the cluster's folder, as the
// server's user.
func (c *cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	// Were the server to keep the output pipe open, Wait would hang forever.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	err = fmt.Errorf("error running %s: %w", strings.Join(append([]string{name}, args...), " "), err)
	if out = bytes.TrimSpace(out); len(out) > 0 {
		err = fmt.Errorf("%w: %s", err, out)
	}
	return err
}
