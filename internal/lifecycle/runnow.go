package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Item is a key and how it is due, as RunNow is given it.
type Item struct {
	Key string
	Due Due
}

// RunNow runs the step of every item whose backoff has passed, each in
// its pool (inline: one after another, in order, on this goroutine, so a
// test's sequence of calls repeats), and waits for them. A key whose step
// is running elsewhere is left to it and run again once it ends. It
// returns the errors of the failed steps and the earliest time one of
// the items is due again: its By, or the end of its backoff.
func (r *Runner) RunNow(ctx context.Context, items []Item, inline bool) (time.Time, []error) {
	now := r.cfg.Clock.Now()
	var next time.Time
	earlier := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	pools := make([][]string, len(r.ready))
	var order []string
	for _, it := range items {
		earlier(it.Due.By)
		if nb := r.notBefore(it.Key, it.Due.By); now.Before(nb) {
			earlier(nb)
			d := it.Due
			d.At = nb
			r.Add(it.Key, d)
			continue
		}
		if !r.claimNow(it.Key, it.Due) {
			continue
		}
		p := r.pool(it.Due.Pool)
		pools[p] = append(pools[p], it.Key)
		order = append(order, it.Key)
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	run := func(ctx context.Context, key string) {
		if err := r.run(ctx, key); err != nil && ctx.Err() == nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	if inline {
		runGrouped(ctx, order, run, r.cfg.Flush)
		return next, errs
	}
	var wg sync.WaitGroup
	for p, keys := range pools {
		var i atomic.Int64
		for range min(r.size(Pool(p)), len(keys)) {
			wg.Go(func() {
				for j := i.Add(1) - 1; int(j) < len(keys); j = i.Add(1) - 1 {
					run(ctx, keys[j])
				}
			})
		}
	}
	wg.Wait()
	return next, errs
}

// claimNow claims key for RunNow and takes it off the queue; false (and
// the key is run again after) if its step is running elsewhere.
func (r *Runner) claimNow(key string, d Due) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[key] {
		if _, ok := r.again[key]; !ok {
			d.At = r.cfg.Clock.Now()
			r.again[key] = d
		}
		return false
	}
	if it, ok := r.queued[key]; ok && !it.ready {
		r.q.remove(it)
		delete(r.queued, key)
	} else if ok {
		return false // due already, a worker takes it
	}
	r.running[key] = true
	return true
}
