package agent

import (
	"context"
	"log/slog"
	"sync"
)

// lazyAttrs is a handler that adds attrs to what it logs, formatting them
// only when a first record is logged or a derived handler is made. A
// task's logger carries its ids on every line, but most tasks log nothing
// at the configured level: formatting the ids up front (slog's With) was
// a third of the agent's own CPU per no-op task.
type lazyAttrs struct {
	base  slog.Handler
	attrs []slog.Attr
	once  sync.Once
	with  slog.Handler
}

func newLazyAttrs(base slog.Handler, attrs ...slog.Attr) *lazyAttrs {
	return &lazyAttrs{base: base, attrs: attrs}
}

func (h *lazyAttrs) handler() slog.Handler {
	h.once.Do(func() { h.with = h.base.WithAttrs(h.attrs) })
	return h.with
}

func (h *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

func (h *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler { return h.handler().WithAttrs(attrs) }

func (h *lazyAttrs) WithGroup(name string) slog.Handler { return h.handler().WithGroup(name) }
