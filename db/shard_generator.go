package db

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ShardGeneratorKind is how a job makes its shard params from each fire,
// ax.job.shard_generator.
type ShardGeneratorKind string

// Shard generator kinds.
const (
	// ShardTimeWindow gives shard i of n the i-th of n equal windows of
	// the generator's window ending at the fire's scheduled time.
	ShardTimeWindow ShardGeneratorKind = "time_window"
	// ShardMod gives shard i of n the residue i of modulus n.
	ShardMod ShardGeneratorKind = "mod"
)

// MaxShardWindowSeconds bounds a time_window generator's window: 366 days.
const MaxShardWindowSeconds = 366 * 86400

// ShardGenerator makes a job's shard params from each fire instead of a
// stored list or range.
type ShardGenerator struct {
	Kind ShardGeneratorKind
	// WindowSeconds is the span a time_window generator splits among the
	// shards (a multiple of the shard count); zero for other kinds.
	WindowSeconds int
}

// ShardFire is one fire of a job with a shard generator: what its shard
// params are rendered from.
type ShardFire struct {
	Generator    ShardGenerator
	Timezone     string // the job's IANA timezone
	Count        int    // shards of the run
	ScheduledFor time.Time
}

// ShardParamsFunc renders the params of a fire's shards, one per shard in
// shard order. The engine's is dispatch.GeneratedShardParams; db holds no
// time-zone logic of its own.
type ShardParamsFunc func(f *ShardFire) ([]string, error)

// generatorColumns turns g into its two columns (NULL, NULL without one).
func generatorColumns(g *ShardGenerator) (*string, *int32) {
	if g == nil {
		return nil, nil
	}
	kind := string(g.Kind)
	if g.Kind != ShardTimeWindow {
		return &kind, nil
	}
	w := int32(g.WindowSeconds)
	return &kind, &w
}

// generatorFromColumns reads a generator back from its columns.
func generatorFromColumns(kind *string, window *int32) *ShardGenerator {
	if kind == nil {
		return nil
	}
	return &ShardGenerator{Kind: ShardGeneratorKind(*kind), WindowSeconds: int(deref(window))}
}

// generatedParams renders the shard params of the inserted executions
// whose jobs have a generator, as TaskPlanForExecutions takes them: ids
// and one JSON array of strings each.
func generatedParams(rows []generatorRow, render ShardParamsFunc) ([]uuid.UUID, [][]byte, error) {
	ids := []uuid.UUID{}
	params := [][]byte{}
	for _, r := range rows {
		g := generatorFromColumns(r.kind, r.window)
		if g == nil {
			continue
		}
		if render == nil {
			return nil, nil, fmt.Errorf("error rendering shard params of job %s: no renderer for generator %s", r.jobID, g.Kind)
		}
		list, err := render(&ShardFire{Generator: *g, Timezone: r.timezone, Count: r.count, ScheduledFor: r.scheduledFor})
		if err != nil {
			return nil, nil, fmt.Errorf("error rendering shard params of job %s: %w", r.jobID, err)
		}
		raw, err := json.Marshal(list)
		if err != nil {
			return nil, nil, fmt.Errorf("error encoding shard params of job %s: %w", r.jobID, err)
		}
		ids = append(ids, r.executionID)
		params = append(params, raw)
	}
	return ids, params, nil
}

// generatorRow is an inserted execution as generatedParams needs it.
type generatorRow struct {
	executionID, jobID uuid.UUID
	kind               *string
	window             *int32
	timezone           string
	count              int
	scheduledFor       time.Time
}
