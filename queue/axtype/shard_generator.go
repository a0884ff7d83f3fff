package axtype

import "time"

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
