package preempt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNotifyContext: the context ends at the notice and carries it, to
// contexts derived from it too; one that ends otherwise carries none.
func TestNotifyContext(t *testing.T) {
	deadline := time.Date(2026, 12, 3, 12, 5, 0, 0, time.UTC)
	dir := t.TempDir()
	file := filepath.Join(dir, "deadline")
	opts := Options{AnnotationsFile: "-", DeadlineFile: file, Poll: 10 * time.Millisecond, Signals: []os.Signal{syscall.SIGUSR2}}

	t.Run("notice", func(t *testing.T) {
		ctx, stop := NotifyContext(t.Context(), opts)
		defer stop()
		item, cancel := context.WithTimeout(ctx, time.Hour) // an item's context, as a queue's client derives it
		defer cancel()
		select {
		case <-ctx.Done():
			t.Fatal("ended before the notice")
		case <-time.After(100 * time.Millisecond):
		}
		if _, ok := Noticed(item); ok {
			t.Fatal("a notice before any")
		}
		os.WriteFile(file, []byte(deadline.Format(time.RFC3339)), 0o644)
		select {
		case <-item.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the item's context did not end at the notice")
		}
		for _, c := range []context.Context{ctx, item} {
			n, ok := Noticed(c)
			if !ok || !n.Deadline.Equal(deadline) || n.Source != "deadline-file" {
				t.Fatalf("Noticed = %+v, %v", n, ok)
			}
			if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), context.Canceled) {
				t.Fatalf("err %v, cause %v: not a cancellation", c.Err(), context.Cause(c))
			}
		}
		if got := context.Cause(ctx).Error(); got != "preempt: node reclaimed (notice from deadline-file), deadline 2026-12-03T12:05:00Z" {
			t.Fatalf("cause %q", got)
		}
	})
	os.Remove(file)

	t.Run("signal", func(t *testing.T) {
		ctx, stop := NotifyContext(t.Context(), opts)
		defer stop()
		// Watch took the signal over before NotifyContext returned.
		syscall.Kill(os.Getpid(), syscall.SIGUSR2)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("no notice from the signal")
		}
		if n, ok := Noticed(ctx); !ok || n.Source != "SIGUSR2" {
			t.Fatalf("Noticed = %+v, %v", n, ok)
		}
	})

	t.Run("stop and parent", func(t *testing.T) {
		ctx, stop := NotifyContext(t.Context(), opts)
		stop()
		if ctx.Err() == nil {
			t.Fatal("stop did not end the context")
		}
		if _, ok := Noticed(ctx); ok {
			t.Fatal("stop is not a notice")
		}
		parent, cancel := context.WithCancel(t.Context())
		ctx, stop = NotifyContext(parent, opts)
		defer stop()
		cancel()
		<-ctx.Done()
		if _, ok := Noticed(ctx); ok {
			t.Fatal("the parent's end is not a notice")
		}
	})
}
