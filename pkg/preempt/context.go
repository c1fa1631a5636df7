package preempt

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// NotifyContext returns a copy of parent that is cancelled when the
// notice comes (from the sources Watch reads, with o as there), when
// parent is done, or when stop is called, whichever is first. stop ends
// the watch and gives the signals back; call it when the work is done.
//
// A context it cancelled at the notice, and every context derived from
// that one, carries the notice: [Noticed] reads it, and
// [context.Cause] is an error that says it. So a worker that takes items
// from a queue can stop taking them when the context ends, and an item's
// handler that sees its context end can tell a reclaim (give the item
// back to the queue now) from any other cancellation.
func NotifyContext(parent context.Context, o Options) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	watch, unwatch := context.WithCancel(ctx)
	notice := Watch(watch, o)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n, ok := <-notice; ok {
			cancel(&noticeError{n})
			for range notice { // closed once Watch has given the signals back
			}
		}
	}()
	return ctx, func() {
		unwatch()
		<-done
		cancel(context.Canceled)
	}
}

// Noticed returns the notice that ended ctx, if a notice did: ctx is a
// context NotifyContext cancelled at the notice, or one derived from it.
func Noticed(ctx context.Context) (Notice, bool) {
	var e *noticeError
	if errors.As(context.Cause(ctx), &e) {
		return e.n, true
	}
	return Notice{}, false
}

// noticeError is the cause of a context cancelled at the notice.
type noticeError struct{ n Notice }

func (e *noticeError) Error() string {
	return fmt.Sprintf("preempt: node reclaimed (notice from %s), deadline %s", e.n.Source, e.n.Deadline.Format(time.RFC3339))
}

// Is makes errors.Is(cause, context.Canceled) true, as it is for any
// other cancellation.
func (e *noticeError) Is(target error) bool { return target == context.Canceled }
