package pglocal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries means initdb and pg_ctl are not installed, so Find cannot
// start a cluster.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (initdb, pg_ctl): " +
	"install them with `apt-get install postgresql` (Debian/Ubuntu), " +
	"`brew install postgresql@16` (macOS), or set DATABASE_URL")

// binSearch says where to look for initdb and pg_ctl. Tests replace it to
// play a machine with or without PostgreSQL.
type binSearch struct {
	// path is searched like $PATH, first for the binaries, then for
	// pg_config, whose --bindir is tried next.
	path string

	// globs match versioned folders that packages keep off PATH; the
	// newest version is tried first.
	globs []string
}

// defaultSearch looks where the common packages install PostgreSQL.
func defaultSearch() *binSearch {
	return &binSearch{
		path: os.Getenv("PATH"),
		globs: []string{
			"/usr/lib/postgresql/*/bin",          // Debian, Ubuntu
			"/usr/pgsql-*/bin",                   // RHEL, Fedora (PGDG packages)
			"/opt/homebrew/opt/postgresql@*/bin", // Homebrew, Apple silicon (keg-only)
			"/usr/local/opt/postgresql@*/bin",    // Homebrew, Intel (keg-only)
		},
	}
}

// find returns the first folder holding both initdb and pg_ctl: pg_ctl starts
// the postgres binary found next to itself, so the two must match.
func (b *binSearch) find(ctx context.Context) (string, error) {
	for _, dir := range b.candidates(ctx) {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func (b *binSearch) candidates(ctx context.Context) []string {
	dirs := pathDirs(b.path)
	if dir := b.pgConfigBindir(ctx); dir != "" {
		dirs = append(dirs, dir)
	}
	var versioned []string
	for _, pattern := range b.globs {
		matches, _ := filepath.Glob(pattern) // the only error is a bad pattern
		versioned = append(versioned, matches...)
	}
	return append(dirs, newestFirst(versioned)...)
}

// pgConfigBindir asks pg_config where the binaries are, which finds them on
// Debian, where only the client tools are on PATH.
func (b *binSearch) pgConfigBindir(ctx context.Context) string {
	pgConfig := lookPath(b.path, "pg_config")
	if pgConfig == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// pathDirs splits a $PATH value, dropping relative entries as exec.LookPath
// does, so a binary in the working folder is never picked up.
func pathDirs(path string) []string {
	var dirs []string
	for _, dir := range filepath.SplitList(path) {
		if filepath.IsAbs(dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

func lookPath(path, name string) string {
	for _, dir := range pathDirs(path) {
		if file := filepath.Join(dir, name); isExecutable(file) {
			return file
		}
	}
	return ""
}

func isExecutable(file string) bool {
	info, err := os.Stat(file)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// newestFirst sorts folders such as /usr/lib/postgresql/15/bin by the version
// in their path, compared as numbers so that 16 comes before 9.6.
func newestFirst(dirs []string) []string {
	slices.SortStableFunc(dirs, func(a, b string) int {
		return slices.Compare(pathVersion(b), pathVersion(a))
	})
	return dirs
}

var versionPattern = regexp.MustCompile(`\d+(\.\d+)*`)

// pathVersion returns the last number in dir, such as [9 6] for
// /usr/lib/postgresql/9.6/bin, or nil when there is none.
func pathVersion(dir string) []int {
	matches := versionPattern.FindAllString(dir, -1)
	if len(matches) == 0 {
		return nil
	}
	var version []int
	for part := range strings.SplitSeq(matches[len(matches)-1], ".") {
		n, _ := strconv.Atoi(part) // only digits, by the pattern
		version = append(version, n)
	}
	return version
}
