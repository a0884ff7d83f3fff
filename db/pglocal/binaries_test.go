package pglocal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBinSearchFind(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		setup func(t *testing.T, root string) (search *binSearch, want string)
	}{
		{"on PATH", func(t *testing.T, root string) (*binSearch, string) {
			bin := fakeBin(t, root, "bin", "initdb", "pg_ctl")
			return &binSearch{path: "relative:" + bin}, bin
		}},
		{"pg_config bindir", func(t *testing.T, root string) (*binSearch, string) {
			server := fakeBin(t, root, "server/bin", "initdb", "pg_ctl")
			tools := fakeBin(t, root, "tools")
			script := "#!/bin/sh\necho " + server + "\n"
			require.NoError(t, os.WriteFile(filepath.Join(tools, "pg_config"), []byte(script), 0o755))
			return &binSearch{path: tools}, server
		}},
		{"newest version", func(t *testing.T, root string) (*binSearch, string) {
			fakeBin(t, root, "postgresql/9.6/bin", "initdb", "pg_ctl")
			want := fakeBin(t, root, "postgresql/16/bin", "initdb", "pg_ctl")
			fakeBin(t, root, "postgresql/15/bin", "initdb", "pg_ctl")
			return &binSearch{globs: []string{filepath.Join(root, "postgresql/*/bin")}}, want
		}},
		{"both binaries in one folder", func(t *testing.T, root string) (*binSearch, string) {
			initdbOnly := fakeBin(t, root, "client", "initdb")
			fakeBin(t, root, "postgresql/17/bin", "pg_ctl")
			want := fakeBin(t, root, "postgresql/15/bin", "initdb", "pg_ctl")
			return &binSearch{path: initdbOnly, globs: []string{filepath.Join(root, "postgresql/*/bin")}}, want
		}},
		{"not executable", func(t *testing.T, root string) (*binSearch, string) {
			bin := fakeBin(t, root, "bin", "initdb", "pg_ctl")
			require.NoError(t, os.Chmod(filepath.Join(bin, "pg_ctl"), 0o644))
			return &binSearch{path: bin}, ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			search, want := tt.setup(t, t.TempDir())
			got, err := search.find(t.Context())
			if want == "" {
				require.ErrorIs(t, err, ErrNoBinaries)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestNewestFirst(t *testing.T) {
	t.Parallel()
	got := newestFirst([]string{
		"/usr/lib/postgresql/9.6/bin",
		"/opt/homebrew/opt/postgresql@16/bin",
		"/usr/local/bin",
		"/usr/pgsql-15/bin",
		"/usr/lib/postgresql/10/bin",
	})
	require.Equal(t, []string{
		"/opt/homebrew/opt/postgresql@16/bin",
		"/usr/pgsql-15/bin",
		"/usr/lib/postgresql/10/bin",
		"/usr/lib/postgresql/9.6/bin",
		"/usr/local/bin",
	}, got)
}

// fakeBin creates root/dir holding executable files with the given names.
func fakeBin(t *testing.T, root, dir string, names ...string) string {
	t.Helper()
	dir = filepath.Join(root, dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	return dir
}
