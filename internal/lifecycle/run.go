package lifecycle

import (
	"context"
	"sync"
	"time"
)

// Run runs keys' steps as they come due until ctx ends: one timer
// goroutine moves due keys to their pool, whose fixed workers run them.
// It returns once every step it started has ended; the keys still queued
// stay queued.
func (r *Runner) Run(ctx context.Context) {
	r.mu.Lock()
	r.active = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for p := range r.ready {
		for range r.size(Pool(p)) {
			wg.Go(func() { r.worker(ctx, Pool(p)) })
		}
	}
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		for _, c := range r.work {
			c.Broadcast()
		}
		r.mu.Unlock()
	})
	defer stop()
	r.timer(ctx)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active = false
	for p, its := range r.ready {
		for _, it := range its {
			it.ready = false
			r.q.push(it)
		}
		r.ready[p] = nil
	}
}

// size is how many workers pool p has.
func (r *Runner) size(p Pool) int {
	if int(p) < len(r.cfg.Pools) && r.cfg.Pools[p] > 0 {
		return r.cfg.Pools[p]
	}
	return 1
}

// timer moves keys to their pools as they come due.
func (r *Runner) timer(ctx context.Context) {
	for {
		r.mu.Lock()
		now := r.cfg.Clock.Now()
		for len(r.q) > 0 && !r.q[0].due.At.After(now) {
			r.toReady(r.q.pop())
		}
		var at <-chan time.Time
		if len(r.q) > 0 {
			at = r.cfg.Clock.After(r.q[0].due.At.Sub(now))
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-at:
		}
	}
}

// worker runs pool p's steps until ctx ends.
func (r *Runner) worker(ctx context.Context, p Pool) {
	for {
		it := r.take(ctx, p)
		if it == nil {
			return
		}
		r.run(ctx, it.key)
	}
}

// take waits for a due key of pool p and claims it; nil once ctx ends.
func (r *Runner) take(ctx context.Context, p Pool) *item {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if len(r.ready[p]) == 0 {
			r.work[p].Wait()
			continue
		}
		it := r.ready[p][0]
		r.ready[p][0] = nil
		r.ready[p] = r.ready[p][1:]
		it.ready = false
		delete(r.queued, it.key)
		if r.running[it.key] {
			// Claimed outside the runner (or by RunNow): run once it ends.
			if a, ok := r.again[it.key]; !ok || it.due.At.Before(a.At) {
				r.again[it.key] = it.due
			}
			continue
		}
		r.running[it.key] = true
		return it
	}
}

// keyOf is the context key under which a step finds its own key.
type keyOf struct{}

// KeyOf is the key whose step ctx belongs to ("" outside a step): a
// change a step makes to its own key needs no Add, its answer schedules
// it.
func KeyOf(ctx context.Context) string {
	k, _ := ctx.Value(keyOf{}).(string)
	return k
}

// run runs key's step, claimed, and schedules what comes next.
func (r *Runner) run(ctx context.Context, key string) error {
	d, err := r.step(context.WithValue(ctx, keyOf{}, key), key)
	if ctx.Err() != nil {
		// Cut off by the end of the run: neither a success nor a failure.
		r.finish(key, Due{}, false)
		return ctx.Err()
	}
	r.finish(key, r.result(key, d, err), err != nil)
	return err
}
