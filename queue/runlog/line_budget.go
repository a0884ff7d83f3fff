// Package runlog writes the log lines that show runs: one when a run
// fires and one when it ends, at info, bounded under load.
package runlog

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultLinesPerSecond is how many lines of one kind (fires, ends) a
// replica writes each second before it summarizes: past it, lines are
// counted and one summary line a second says how many were left out, by
// state. 20 lines a second keeps a terminal readable and a log pipeline
// cheap; the metrics count every run.
const DefaultLinesPerSecond = 20

// LineBudget lets up to PerSecond lines a second through; past it, lines
// are counted and one line at the end of that second summarizes them.
type LineBudget struct {
	logger    *slog.Logger
	perSecond int
	summary   string // message of the summary line

	mu          sync.Mutex
	windowStart time.Time
	used        int
	left        map[string]int // left-out lines by key (a state)
	flushing    bool
}

// NewLineBudget returns a budget of perSecond lines (DefaultLinesPerSecond
// when 0) whose summary lines say summary.
func NewLineBudget(logger *slog.Logger, perSecond int, summary string) *LineBudget {
	if perSecond <= 0 {
		perSecond = DefaultLinesPerSecond
	}
	return &LineBudget{logger: logger, perSecond: perSecond, summary: summary, left: map[string]int{}}
}

// Allow reports whether a line may be written now; when not, it is
// counted under key for the summary.
func (b *LineBudget) Allow(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.windowStart) >= time.Second {
		b.flushLocked()
		b.windowStart, b.used = now, 0
	}
	if b.used < b.perSecond {
		b.used++
		return true
	}
	b.left[key]++
	if !b.flushing {
		// The summary is written when the second ends, even if no
		// further line comes.
		b.flushing = true
		time.AfterFunc(time.Until(b.windowStart.Add(time.Second)), func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.flushLocked()
		})
	}
	return false
}

// flushLocked writes the summary of the left-out lines, if any.
func (b *LineBudget) flushLocked() {
	b.flushing = false
	if len(b.left) == 0 {
		return
	}
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(b.left)) {
		total += b.left[k]
		parts = append(parts, fmt.Sprintf("%s=%d", k, b.left[k]))
	}
	b.logger.LogAttrs(context.Background(), slog.LevelInfo, b.summary,
		slog.Int("left_out", total), slog.String("by_state", strings.Join(parts, ",")),
		slog.Int("lines_per_second", b.perSecond))
	clear(b.left)
}
