package server

import (
	"context"
	"log/slog"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// client-go logs through klog, one logger per process: it is set once,
// before any watch can read it, to a handler that writes to the log of
// the server started last (slog's default until one starts). Setting
// klog's logger at each Start raced with the watches already running in
// the same process (tests run several servers and clusters).
var klogTarget atomic.Pointer[slog.Logger]

func init() { klog.SetSlogLogger(slog.New(latestHandler{})) }

// logClientGo sends client-go's log lines (a watch that lost its API
// server, say) to l.
func logClientGo(l *slog.Logger) { klogTarget.Store(l) }

// latestHandler hands each record to klogTarget's handler as it is then,
// with the attributes and groups added on the way.
type latestHandler struct {
	with func(slog.Handler) slog.Handler
}

func (h latestHandler) target() slog.Handler {
	l := klogTarget.Load()
	if l == nil {
		l = slog.Default()
	}
	t := l.Handler()
	if h.with != nil {
		t = h.with(t)
	}
	return t
}

func (h latestHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.target().Enabled(ctx, l)
}

func (h latestHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h latestHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return h.then(func(t slog.Handler) slog.Handler { return t.WithAttrs(as) })
}

func (h latestHandler) WithGroup(name string) slog.Handler {
	return h.then(func(t slog.Handler) slog.Handler { return t.WithGroup(name) })
}

func (h latestHandler) then(f func(slog.Handler) slog.Handler) slog.Handler {
	prev := h.with
	return latestHandler{with: func(t slog.Handler) slog.Handler {
		if prev != nil {
			t = prev(t)
		}
		return f(t)
	}}
}
