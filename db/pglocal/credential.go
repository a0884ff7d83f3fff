package pglocal

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser is the OS user that runs the cluster when Find runs as root.
const serverUser = "postgres"

// serverCredential returns who runs initdb and pg_ctl: nil for the current
// user, or the postgres user when the current user is root, because
// PostgreSQL refuses to run as root (as in containers and CI).
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no %q user to run it as "+
			"(create one with `useradd --system --create-home postgres`, run as another user, or set DATABASE_URL): %w",
			serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("error parsing uid of user %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("error parsing gid of user %q: %w", serverUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
