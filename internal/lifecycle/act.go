package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// act makes r's calls for node n, group by group, the calls of a group at
// once (up to WorkCalls), each cut off as it says; a failed essential
// call stops the groups after its own (the act stage). held says whether
// the turn got the claim r.Hold names: without it the calls are not made
// (errNotTried).
func (e *Executor) act(ctx context.Context, n domain.Node, f *Facts, r *Ready, held bool) []Result {
	out := make([]Result, len(r.Calls))
	for i, c := range r.Calls {
		out[i].Call = c
	}
	if r.Hold != "" && !held {
		for i := range out {
			out[i].Err = errNotTried
		}
		return out
	}
	for lo := 0; lo < len(out); {
		hi := lo + 1
		for hi < len(out) && out[hi].Call.Group == out[lo].Call.Group {
			hi++
		}
		e.group(ctx, n, f, out[lo:hi])
		for _, res := range out[lo:hi] {
			if res.Err != nil && res.Call.Essential {
				return out[:hi]
			}
		}
		lo = hi
	}
	return out
}

// group makes one group's calls at once and waits for them.
func (e *Executor) group(ctx context.Context, n domain.Node, f *Facts, rs []Result) {
	start := e.cfg.Clock.Now()
	if len(rs) == 1 || e.cfg.Instant {
		for i := range rs {
			e.call(ctx, &n, f, &rs[i], start)
		}
		return
	}
	e.parallel(ctx, n, *f, rs, start)
}

// parallel makes rs's calls at once, WorkCalls at a time; the node and
// facts are its own copies, which its goroutines share.
func (e *Executor) parallel(ctx context.Context, n domain.Node, f Facts, rs []Result, start time.Time) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, WorkCalls)
	for i := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e.call(ctx, &n, &f, &rs[i], start)
		})
	}
	wg.Wait()
}

// call makes one call, cut off at its Until and its group's start plus
// its Within (unless the drivers answer at once).
func (e *Executor) call(ctx context.Context, n *domain.Node, f *Facts, r *Result, start time.Time) {
	c := &r.Call
	if !e.cfg.Instant {
		cut := c.Until
		if c.Within > 0 && (cut.IsZero() || start.Add(c.Within).Before(cut)) {
			cut = start.Add(c.Within)
		}
		if !cut.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = e.until(ctx, cut)
			defer cancel()
		}
	}
	cd, mp := e.cluster, e.machines
	switch c.Kind {
	case CallMark:
		r.Err = cd.MarkDraining(ctx, n.ClusterID, n.Name, c.Marks)
	case CallList:
		r.Work, r.Err = cd.ListWork(ctx, n.ClusterID, n.Name)
	case CallNotify:
		r.Err = cd.Notify(ctx, n.ClusterID, n.Name, c.Work, c.By)
	case CallPost:
		var w *driver.Work
		if c.OnWork {
			work := c.Work
			w = &work
		}
		r.Err = cd.PostNotice(ctx, n.ClusterID, n.Name, w, c.Notice)
	case CallRelease:
		r.Err = cd.Release(ctx, n.ClusterID, n.Name)
	case CallAddNode:
		r.Err = cd.AddNode(ctx, specOf(*n, f.ClusterType))
	case CallSetClass:
		r.Err = cd.SetClass(ctx, specOf(*n, f.ClusterType))
	case CallPrepare:
		r.Done, r.Err = mp.Prepare(ctx, f.Machine, specOf(*n, f.ClusterType))
		if r.Err == nil {
			_, had := e.first.LoadOrStore(n.ID, e.cfg.Clock.Now())
			r.First = !had
		}
	case CallWipe:
		r.Done, r.Err = mp.Wipe(ctx, f.Machine, n.ClusterID, n.Name)
	}
}

// until returns ctx cancelled once the executor's clock reaches t (at
// once if it has).
func (e *Executor) until(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	d := t.Sub(e.cfg.Clock.Now())
	if d <= 0 {
		cancel()
		return ctx, cancel
	}
	ch := e.cfg.Clock.After(d)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
