package dbtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
)

// A test's database is recycled for the next test of the same process
// when the test changed nothing in it but rows: its rows are deleted, the
// seed rows the migrations insert put back as they were (an `ax serve`
// stamps its retention flags into ax.history_setting when it starts), and
// its sequences and statistics counters reset. A new database costs a
// CREATE DATABASE and a DROP DATABASE, each of which waits for a
// checkpoint of whatever the tests beside it wrote. A database whose
// schema, catalog statistics or settings a test changed, that
// still has sessions, into which its tests wrote more than
// recycleMaxWrites rows, or whose test failed is dropped as before.
//
// "Changed nothing but rows" is checked, not assumed. Every
// database-local catalog is read for its rows about user objects (oid
// 16384 and up: tables, columns, functions, triggers, grants, planner
// statistics, …): a DDL, GRANT, COMMENT or ANALYZE writes such rows, so
// the counts must match a fresh copy's and no row may be newer than the
// moment that copy was read. VACUUM updates pg_class in place, so its
// size and freeze columns are compared too, as are the database's
// settings and prepared transactions.

// recycleMaxWrites bounds the rows (inserted or updated, from the
// statistics counters) the tests of one recycled database may write over
// its life: deleted rows leave their pages behind (autovacuum may be
// off), and a later test should not scan many predecessors' dead rows.
const recycleMaxWrites = 20_000

// sessionsGoneWait is how long a test's closed connections get to
// disappear from pg_stat_activity (a backend exits after its client's
// Terminate message, not before Close returns).
const sessionsGoneWait = 500 * time.Millisecond

var (
	freeMu sync.Mutex
	free   []string             // recycled databases, ready for the next test
	writes = map[string]int64{} // rows written into each recycled database

	baselineMu sync.Mutex
	baseline   *freshState // read from the first fresh copy; nil until then
	recycleOff bool        // the server refused a reset step: drop instead

	copied, recycled, dropped atomic.Int64 // for the summary of go test -v
)

// freshState is what recycling compares and restores: read once from a
// fresh copy of the template.
type freshState struct {
	xid       int64    // pg_current_xact_id() when it was read
	check     string   // the statement of catalogCheck, built for this server
	catalogs  string   // each catalog's count of rows about user objects
	inPlace   string   // fingerprint of pg_class's in-place columns
	seeds     string   // fingerprint of the seed rows
	tables    []string // quoted names of the tables without seed rows
	seeded    []string // quoted names of the tables with seed rows
	reseed    string   // statements that put the seed rows back
	sequences string   // statement that sets every sequence back
}

// takeFree returns a recycled database's name, or "" when there is none.
func takeFree() string {
	freeMu.Lock()
	defer freeMu.Unlock()
	if len(free) == 0 {
		return ""
	}
	name := free[len(free)-1]
	free = free[:len(free)-1]
	return name
}

// putFree makes a recycled database available to the next test.
func putFree(name string) {
	freeMu.Lock()
	defer freeMu.Unlock()
	free = append(free, name)
}

// takeFreeAll empties the free list, for the drops at the end of a run.
func takeFreeAll() []string {
	freeMu.Lock()
	defer freeMu.Unlock()
	names := free
	free = nil
	return names
}

// noteFresh reads the state of a database just copied from the template,
// once per process, as what recycled databases must match.
func noteFresh(ctx context.Context, url string) error {
	baselineMu.Lock()
	defer baselineMu.Unlock()
	if baseline != nil || recycleOff {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("error connecting: %w", err)
	}
	defer conn.Close(ctx)
	state, err := readFreshState(ctx, conn)
	if err != nil {
		return err
	}
	baseline = state
	return nil
}

func readFreshState(ctx context.Context, conn *pgx.Conn) (*freshState, error) {
	state := &freshState{}
	var err error
	if state.tables, state.seeded, err = listTables(ctx, conn); err != nil {
		return nil, err
	}
	if state.sequences, err = sequencesReset(ctx, conn); err != nil {
		return nil, err
	}
	if state.check, err = catalogCheck(ctx, conn, state.seeded); err != nil {
		return nil, err
	}
	if state.reseed, err = seedRestore(ctx, conn, state.seeded); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&state.xid); err != nil {
		return nil, fmt.Errorf("error reading the transaction id: %w", err)
	}
	found, err := readCatalogs(ctx, conn, state)
	if err != nil {
		return nil, err
	}
	if found.newRows != 0 {
		return nil, fmt.Errorf("a fresh copy has %d catalog rows newer than itself", found.newRows)
	}
	state.catalogs, state.inPlace, state.seeds = found.catalogs, found.inPlace, found.seeds
	return state, nil
}

// listTables returns the user tables (partitions included), split by
// whether the migrations left rows in them.
func listTables(ctx context.Context, conn *pgx.Conn) (empty, seeded []string, err error) {
	rows, err := conn.Query(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_%'
		ORDER BY 1`)
	if err != nil {
		return nil, nil, fmt.Errorf("error listing tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("error listing tables: %w", err)
	}
	if len(tables) == 0 {
		return nil, nil, nil
	}
	// One statement for all: which of the tables have rows.
	probes := make([]string, len(tables))
	for i, table := range tables {
		probes[i] = fmt.Sprintf("SELECT %d WHERE EXISTS (SELECT 1 FROM ONLY %s)", i, table)
	}
	rows, err = conn.Query(ctx, strings.Join(probes, " UNION ALL "))
	if err != nil {
		return nil, nil, fmt.Errorf("error reading the tables: %w", err)
	}
	withRows, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, nil, fmt.Errorf("error reading the tables: %w", err)
	}
	for i, table := range tables {
		if slices.Contains(withRows, int32(i)) {
			seeded = append(seeded, table)
		} else {
			empty = append(empty, table)
		}
	}
	return empty, seeded, nil
}

// sequencesReset returns a statement that sets every sequence as it is
// now (setval is not transactional and leaves the catalogs alone, unlike
// ALTER SEQUENCE … RESTART, which gives the sequence a new file).
func sequencesReset(ctx context.Context, conn *pgx.Conn) (string, error) {
	rows, err := conn.Query(ctx, `
		SELECT format('setval(%L, %s, %s)', format('%I.%I', schemaname, sequencename),
			coalesce(last_value, start_value), CASE WHEN last_value IS NULL THEN 'false' ELSE 'true' END)
		FROM pg_sequences ORDER BY 1`)
	if err != nil {
		return "", fmt.Errorf("error reading sequences: %w", err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("error reading sequences: %w", err)
	}
	if len(calls) == 0 {
		return "", nil
	}
	return "SELECT " + strings.Join(calls, ", "), nil
}

// seedRestore returns statements that empty the seeded tables and insert
// their rows as they are now (each table's columns but generated ones,
// from a JSON literal of the rows).
func seedRestore(ctx context.Context, conn *pgx.Conn, seeded []string) (string, error) {
	var b strings.Builder
	for _, table := range seeded {
		var rows, stmt string
		if err := conn.QueryRow(ctx, "SELECT json_agg(x)::text FROM ONLY "+table+" x").Scan(&rows); err != nil {
			return "", fmt.Errorf("error reading the seed rows of %s: %w", table, err)
		}
		err := conn.QueryRow(ctx, `
			SELECT format('DELETE FROM ONLY %1$s; INSERT INTO %1$s (%2$s) SELECT %2$s FROM json_populate_recordset(NULL::%1$s, %3$L);',
			              $1::text, string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum), $2::text)
			FROM pg_attribute a
			WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''`,
			table, rows).Scan(&stmt)
		if err != nil {
			return "", fmt.Errorf("error reading the columns of %s: %w", table, err)
		}
		b.WriteString(stmt)
	}
	return b.String(), nil
}

// catalogCheck builds, from the server's own list of database-local
// catalogs, the one statement readCatalogs runs. Each catalog's rows
// about user objects are those whose first oid column (pg_depend's
// objid) is 16384 or more; $1 is the transaction id of the fresh read.
func catalogCheck(ctx context.Context, conn *pgx.Conn, seeded []string) (string, error) {
	rows, err := conn.Query(ctx, `
		SELECT format('SELECT %L, count(*), count(*) FILTER (WHERE age(x.xmin) < (SELECT d FROM since)) FROM pg_catalog.%I x WHERE %I >= 16384',
			c.relname, c.relname, k.attname)
		FROM pg_class c
		CROSS JOIN LATERAL (
			SELECT a.attname FROM pg_attribute a
			WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.atttypid IN ('oid'::regtype, 'regproc'::regtype)
			ORDER BY a.attname = 'classid', a.attnum LIMIT 1
		) k
		WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
		ORDER BY c.relname`)
	if err != nil {
		return "", fmt.Errorf("error listing catalogs: %w", err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("error listing catalogs: %w", err)
	}
	// The database's settings live in a shared catalog, keyed by database.
	counts = append(counts, `SELECT 'pg_db_role_setting', count(*), count(*) FILTER (WHERE age(x.xmin) < (SELECT d FROM since))
		FROM pg_db_role_setting x WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		`SELECT 'pg_prepared_xacts', count(*), 0 FROM pg_prepared_xacts WHERE database = current_database()`)
	seeds := []string{"''"}
	for _, table := range seeded {
		seeds = append(seeds, "(SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM ONLY "+table+" x)")
	}
	return `WITH since AS (SELECT pg_current_xact_id()::text::bigint - $1 AS d),
		counts AS (` + strings.Join(counts, " UNION ALL ") + `)
		SELECT (SELECT string_agg(c.t || ':' || c.n, ',' ORDER BY c.t) FROM counts AS c(t, n, recent)),
			(SELECT sum(c.recent)::bigint FROM counts AS c(t, n, recent)),
			(SELECT md5(string_agg(concat_ws(' ', oid, relfilenode, relpages, reltuples, relallvisible, relfrozenxid, relminmxid), ',' ORDER BY oid))
			 FROM pg_class WHERE oid >= 16384),
			concat_ws(',', ` + strings.Join(seeds, ", ") + `),
			(SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint FROM pg_stat_user_tables)`, nil
}

// catalogRead is what readCatalogs found.
type catalogRead struct {
	catalogs string // each catalog's count of rows about user objects
	newRows  int64  // of those, rows written after the fresh read
	inPlace  string // fingerprint of pg_class's in-place columns
	seeds    string // fingerprint of the seed rows
	writes   int64  // rows inserted or updated since the last reset
}

func readCatalogs(ctx context.Context, conn *pgx.Conn, state *freshState) (catalogRead, error) {
	var found catalogRead
	err := conn.QueryRow(ctx, state.check, state.xid).Scan(&found.catalogs, &found.newRows, &found.inPlace, &found.seeds, &found.writes)
	if err != nil {
		return found, fmt.Errorf("error reading catalogs: %w", err)
	}
	return found, nil
}

// recycle resets database name for another test and reports whether it
// did; a database it does not reset is for dropping.
func recycle(ctx context.Context, admin, name string) bool {
	baselineMu.Lock()
	state, off := baseline, recycleOff
	baselineMu.Unlock()
	if state == nil || off {
		return false
	}
	url, err := db.WithDatabase(admin, name)
	if err != nil {
		return false
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	if !sessionsGone(ctx, conn) {
		return false
	}
	fit, reseed := unchanged(ctx, conn, state, name)
	if !fit {
		return false
	}
	if err := reset(ctx, conn, state, reseed); err != nil {
		// Most likely the role may not set session_replication_role.
		baselineMu.Lock()
		recycleOff = true
		baselineMu.Unlock()
		return false
	}
	return true
}

// sessionsGone waits briefly for the test's other sessions to end.
func sessionsGone(ctx context.Context, conn *pgx.Conn) bool {
	deadline := time.Now().Add(sessionsGoneWait)
	for {
		var others int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		if err != nil {
			return false
		}
		if others == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unchanged reports whether database name's catalogs are as in a fresh
// copy and its tests stayed within recycleMaxWrites (fit), and whether
// its seed rows changed (reseed).
func unchanged(ctx context.Context, conn *pgx.Conn, state *freshState, name string) (fit, reseed bool) {
	found, err := readCatalogs(ctx, conn, state)
	if err != nil || found.catalogs != state.catalogs || found.newRows != 0 || found.inPlace != state.inPlace {
		return false, false
	}
	freeMu.Lock()
	defer freeMu.Unlock()
	writes[name] += found.writes
	return writes[name] <= recycleMaxWrites, found.seeds != state.seeds
}

// reset deletes every row but the seed rows (without firing triggers,
// foreign keys' included: every table is emptied), puts the seed rows
// back as they were when reseed, sets the sequences back and zeroes the
// statistics counters, which tests read and unchanged counts writes by.
//
// A table without a page has no row: most tests write a few of the
// hundred tables, and a DELETE of each of the others cost the reset
// most of its 50 ms.
func reset(ctx context.Context, conn *pgx.Conn, state *freshState, reseed bool) error {
	rows, err := conn.Query(ctx, `SELECT t FROM unnest($1::text[]) t WHERE pg_relation_size(t::regclass) > 0`, state.tables)
	if err != nil {
		return fmt.Errorf("error reading table sizes: %w", err)
	}
	written, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error reading table sizes: %w", err)
	}
	var b strings.Builder
	b.WriteString("BEGIN; SET LOCAL session_replication_role = replica;")
	for _, table := range written {
		b.WriteString(" DELETE FROM ONLY " + table + ";")
	}
	if reseed {
		b.WriteString(" " + state.reseed)
	}
	if state.sequences != "" {
		b.WriteString(" " + state.sequences + ";")
	}
	b.WriteString(" COMMIT;")
	if serverMajor(conn) >= 15 {
		// The counts of the statements above are the backend's own until it
		// reports them, which it does before it answers, forced or once a
		// second: forced, they are in the shared counters the reset zeroes.
		b.WriteString(" SELECT pg_stat_force_next_flush();")
	}
	// The simple protocol runs the statements in order.
	if _, err := conn.PgConn().Exec(ctx, b.String()).ReadAll(); err != nil {
		return fmt.Errorf("error resetting: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_reset()"); err != nil {
		return fmt.Errorf("error resetting the statistics: %w", err)
	}
	return nil
}
