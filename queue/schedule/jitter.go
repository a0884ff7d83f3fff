package schedule

import (
	"crypto/md5" //nolint:gosec // a spread, not a secret: it must equal Postgres's md5
	"encoding/binary"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// MaxJitterSeconds bounds a job's jitter_seconds (a day), as the
// job_jitter_bounds constraint does.
const MaxJitterSeconds = 86400

// JitterOffset is how long after tick job's scheduled run becomes
// leasable with jitterSeconds of jitter: a millisecond offset in
// [0, jitterSeconds) from the first 32 bits of md5(job id "/" tick's Unix
// seconds). It is the Go twin of ax.jitter_offset, which sets the tasks'
// not_before; it depends on nothing else, so every replica and every
// preview gives one tick the same offset.
func JitterOffset(job uuid.UUID, tick time.Time, jitterSeconds int) time.Duration {
	if jitterSeconds <= 0 {
		return 0
	}
	sum := md5.Sum([]byte(job.String() + "/" + strconv.FormatInt(floorUnix(tick), 10)))
	ms := uint64(binary.BigEndian.Uint32(sum[:4])) % (uint64(jitterSeconds) * 1000)
	return time.Duration(ms) * time.Millisecond
}

// floorUnix is tick's Unix seconds rounded down, as floor(extract(epoch))
// is in SQL.
func floorUnix(tick time.Time) int64 { return tick.Truncate(time.Second).Unix() }
