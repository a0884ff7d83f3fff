package dispatch

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
)

// windowTimeLayout is RFC 3339 with a numeric offset always: a window in
// Europe/London in winter reads +00:00, never Z, so it shows local time.
const windowTimeLayout = "2006-01-02T15:04:05.999999999-07:00"

const secondsPerDay = 86400

// ShardWindow is the param of one time_window shard: the half-open span
// [From, To) in RFC 3339 with the job's local offset.
type ShardWindow struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ShardResidue is the param of one mod shard: the shard handles the ids
// with id % Modulus = Residue.
type ShardResidue struct {
	Modulus int `json:"modulus"`
	Residue int `json:"residue"`
}

// GeneratedShardParams renders the shard params of a fire of a job with a
// shard generator, one JSON object per shard; it is the axtype.ShardParamsFunc
// that fires use and what shard previews show.
func GeneratedShardParams(f *axtype.ShardFire) ([]string, error) {
	if f.Count < 1 {
		return nil, fmt.Errorf("shard count %d is not positive", f.Count)
	}
	switch f.Generator.Kind {
	case axtype.ShardMod:
		return encodeEach(f.Count, func(i int) any { return ShardResidue{Modulus: f.Count, Residue: i} })
	case axtype.ShardTimeWindow:
		loc, err := cron.LoadLocation(f.Timezone)
		if err != nil {
			return nil, fmt.Errorf("error loading timezone %q: %w", f.Timezone, err)
		}
		bounds, err := WindowBounds(f.ScheduledFor, f.Generator.WindowSeconds, f.Count, loc)
		if err != nil {
			return nil, err
		}
		return encodeEach(f.Count, func(i int) any {
			return ShardWindow{From: bounds[i].In(loc).Format(windowTimeLayout), To: bounds[i+1].In(loc).Format(windowTimeLayout)}
		})
	}
	return nil, fmt.Errorf("unknown shard generator %q", f.Generator.Kind)
}

// WindowBounds returns the n+1 bounds of n equal windows of
// windowSeconds ending at end: window i is [bounds[i], bounds[i+1]).
//
// A window of whole days is split in wall-clock time in loc, as a data
// pipeline partitions by local date and hour: the last day before a local
// midnight covers that local day exactly, 23 hours across a spring-forward
// (the skipped hour's window is empty: a bound in the gap is the gap's
// end) and 25 across a fall-back (the repeated hour's window holds both
// passes: a bound in it is its first occurrence). Any other window is an
// absolute span, every part the same number of seconds, so hourly fires of
// the last hour tile the timeline across a transition.
func WindowBounds(end time.Time, windowSeconds, n int, loc *time.Location) ([]time.Time, error) {
	if windowSeconds < 1 || n < 1 || windowSeconds%n != 0 {
		return nil, fmt.Errorf("a window of %d s does not split into %d whole-second parts", windowSeconds, n)
	}
	step := time.Duration(windowSeconds/n) * time.Second
	bounds := make([]time.Time, n+1)
	bounds[n] = end
	wallEnd := cron.WallTime(end, loc)
	for i := range n {
		back := time.Duration(n-i) * step
		if windowSeconds%secondsPerDay == 0 {
			bounds[i] = cron.FirstInstant(wallEnd.Add(-back), loc)
		} else {
			bounds[i] = end.Add(-back)
		}
	}
	return bounds, nil
}

func encodeEach(n int, param func(i int) any) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		raw, err := json.Marshal(param(i))
		if err != nil {
			return nil, fmt.Errorf("error encoding shard param: %w", err)
		}
		out[i] = string(raw)
	}
	return out, nil
}

// JobShardParams returns the params the shards of a fire of j scheduled
// for at get, as TaskPlanForExecutions makes them: the generator's, else
// the job's list, else each shard's part of the range as "from-to". A
// broadcast job has one task per live agent, which j alone cannot tell.
func JobShardParams(j *axtype.Job, at time.Time) ([]string, error) {
	n := max(j.ShardCount, 1)
	if j.ShardGenerator != nil {
		return GeneratedShardParams(&axtype.ShardFire{Generator: *j.ShardGenerator, Timezone: j.Timezone, Count: n, ScheduledFor: at})
	}
	out := make([]string, n)
	for i := range out {
		if i < len(j.ShardParams) {
			out[i] = j.ShardParams[i]
			continue
		}
		out[i] = rangePart(j.ShardRangeFrom, j.ShardRangeTo, i, n) + "-" + rangePart(j.ShardRangeFrom, j.ShardRangeTo, i+1, n)
	}
	return out, nil
}

// rangePart returns from + ⌊(to−from)·i/n⌋ exactly, as the task insert's
// numeric arithmetic does.
func rangePart(from, to int64, i, n int) string {
	width := new(big.Int).Sub(big.NewInt(to), big.NewInt(from))
	part := width.Mul(width, big.NewInt(int64(i)))
	part.Div(part, big.NewInt(int64(n))) // floor: width and i are not negative
	return strconv.FormatInt(part.Add(part, big.NewInt(from)).Int64(), 10)
}
