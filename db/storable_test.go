package db_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestCheckStorableJSONAgreesWithPostgres: for hand-picked edges and for
// random documents built from them, CheckStorableJSON refuses exactly what
// Postgres's jsonb input refuses, and names where.
func TestCheckStorableJSONAgreesWithPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	cases := []struct {
		doc     string
		pointer string // where the refusal is, for refused documents
	}{
		{`{"x":"\ud800"}`, "/x"},
		{`{"x":"\u0000"}`, "/x"},
		{`{"x":"\ud83d\ude00"}`, ""},
		{`{"\ud800":1}`, ""},
		{`"\udc00\ud800"`, ""},
		{`"\ud800\ud800"`, ""},
		{`"\ud800x"`, ""},
		{`"\ud800\n"`, ""},
		{`"\\u0000"`, ""},
		{`{"a/b~":[1,{"c":"\ud800"}]}`, "/a~1b~0/1/c"},
		{`1e1000`, ""}, {`1e131071`, ""}, {`-1e131071`, ""}, {`1e131072`, ""}, {`0.1e131072`, ""},
		{`0.0001e131075`, ""}, {`0.0001e131076`, ""},
		{`1e-16383`, ""}, {`1e-16384`, ""}, {`0e-16383`, ""}, {`0e-20000`, ""}, {`0.00e-16382`, ""},
		{`100e-16385`, ""}, {`0e200000`, ""}, {`0.0e131073`, ""}, {`1e-1000000000`, ""},
		{`1e99999999999999999999999`, ""}, {`0e99999999999999999999999`, ""},
		{`12.5e-16382`, ""}, {`-0.0`, ""}, {`1E+5`, ""},
		{`[` + strings.Repeat(`[`, 999) + strings.Repeat(`]`, 999) + `]`, ""},
		{`{"k":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`, ""},
		{"\"\xff\"", ""},
		{`{"a":true,"b":false,"c":null,"d":[],"e":{}}`, ""},
	}
	for _, c := range cases {
		ours := axtype.CheckStorableJSON([]byte(c.doc))
		theirs := postgresRefuses(ctx, t, pool, c.doc)
		if c.doc == `{"k":`+strings.Repeat(`[`, 1000)+strings.Repeat(`]`, 1000)+`}` {
			// Deeper than ax allows, though this Postgres still parses it.
			require.Error(t, ours)
			continue
		}
		require.Equal(t, theirs, ours != nil, "%.80s: ours %v", c.doc, ours)
		if c.pointer != "" {
			var ue *axtype.UnstorableError
			require.True(t, errors.As(ours, &ue))
			require.Equal(t, c.pointer, ue.Pointer)
		}
	}

	// Random documents mixing the edges: strings with escapes and numbers
	// near numeric's limits, nested in objects and arrays.
	atoms := []string{`"\ud800"`, `"\udfff"`, `"\ud83d\ude00"`, `"\u0000"`, `"a\u00e9"`, `"\"\\"`,
		`1e131071`, `1e131072`, `5e-16383`, `5e-16384`, `0.000e-16380`, `0.000e-16381`, `-12.34e5`, `0`, `true`, `null`}
	rng := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth > 3 || rng.IntN(3) == 0 {
			return atoms[rng.IntN(len(atoms))]
		}
		n := rng.IntN(3)
		parts := make([]string, n)
		if rng.IntN(2) == 0 {
			for i := range parts {
				parts[i] = gen(depth + 1)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		for i := range parts {
			parts[i] = atoms[rng.IntN(6)] + ":" + gen(depth+1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for range 300 {
		doc := gen(0)
		ours := axtype.CheckStorableJSON([]byte(doc)) != nil
		require.Equal(t, postgresRefuses(ctx, t, pool, doc), ours, "%s", doc)
	}
}

// postgresRefuses reports whether Postgres refuses doc as jsonb.
func postgresRefuses(ctx context.Context, t *testing.T, pool *pgxpool.Pool, doc string) bool {
	t.Helper()
	_, err := pool.Exec(ctx, "SELECT $1::text::jsonb", doc)
	return err != nil
}

func TestCheckStorableText(t *testing.T) {
	t.Parallel()
	require.NoError(t, axtype.CheckStorableText("héllo\n\t"))
	require.Error(t, axtype.CheckStorableText("a\x00b"))
	require.Error(t, axtype.CheckStorableText("a\xffb"))
}
