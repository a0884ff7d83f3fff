package db

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// generatorColumns turns g into its two columns (NULL, NULL without one).
func generatorColumns(g *axtype.ShardGenerator) (*string, *int32) {
	if g == nil {
		return nil, nil
	}
	kind := string(g.Kind)
	if g.Kind != axtype.ShardTimeWindow {
		return &kind, nil
	}
	w := int32(g.WindowSeconds)
	return &kind, &w
}

// generatorFromColumns reads a generator back from its columns.
func generatorFromColumns(kind *string, window *int32) *axtype.ShardGenerator {
	if kind == nil {
		return nil
	}
	return &axtype.ShardGenerator{Kind: axtype.ShardGeneratorKind(*kind), WindowSeconds: int(deref(window))}
}

// generatedParams renders the shard params of the inserted executions
// whose jobs have a generator, as TaskPlanForExecutions takes them: ids
// and one JSON array of strings each.
func generatedParams(rows []generatorRow, render axtype.ShardParamsFunc) ([]uuid.UUID, [][]byte, error) {
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
		list, err := render(&axtype.ShardFire{Generator: *g, Timezone: r.timezone, Count: r.count, ScheduledFor: r.scheduledFor})
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
