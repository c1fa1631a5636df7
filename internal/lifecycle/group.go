package lifecycle

import "context"

// Turns run inline (RunDue: a simulation, a test's Turn) go one at a time
// in a fixed order, so that a replay repeats to the byte. Run one after
// another, each commits alone; a server's turns run at once and share
// commits (the World groups them). To share commits inline too, the turns
// of one call run as coroutines: each runs until its World parks it at a
// commit (Park) or it ends, then the next in order runs; once all are
// parked or done, the World flushes the parked commits in one transaction
// (Grouper) and the parked turns go on, again one at a time in order.

// Grouper is a World whose commits, made in an inline group of turns,
// park (Park) until Flush commits them together.
type Grouper interface {
	// Flush commits what the parked turns' commits queued.
	Flush(ctx context.Context)
}

// parker is a coroutine's place in its group, in its turn's context.
type parker struct {
	g      *group
	resume chan struct{}
	parked bool
	// panicked holds what the turn panicked with: raised again on the
	// group's goroutine, where the caller's recover (a property test's)
	// expects it. done: the turn ended.
	panicked any
	done     bool
}

type parkerKey struct{}

// group runs turns as coroutines, one at a time.
type group struct {
	stopped chan struct{} // the running coroutine parked or ended
}

// Park is called by a Grouper's commit, having queued its writes: in an
// inline group it lets the group's next turn run and returns once the
// group flushed (true); outside a group it returns false at once, and the
// caller commits as usual.
func Park(ctx context.Context) bool {
	p, ok := ctx.Value(parkerKey{}).(*parker)
	if !ok {
		return false
	}
	p.parked = true
	p.g.stopped <- struct{}{}
	<-p.resume
	return true
}

// runGrouped runs run for each key as described above, flushing through
// flush; with no flush, or one key, it runs them one after another.
func runGrouped(ctx context.Context, keys []string, run func(context.Context, string), flush func(context.Context)) {
	if flush == nil || len(keys) < 2 {
		for _, k := range keys {
			run(ctx, k)
		}
		return
	}
	g := &group{stopped: make(chan struct{})}
	ps := make([]*parker, len(keys))
	for i, k := range keys {
		p := &parker{g: g, resume: make(chan struct{})}
		ps[i] = p
		pctx := context.WithValue(ctx, parkerKey{}, p)
		w := getWorker()
		w.tasks <- func() {
			defer func() {
				p.panicked, p.done = recover(), true
				g.stopped <- struct{}{}
			}()
			run(pctx, k)
		}
		// Its worker goes back once its turn ended, and only then: one
		// left parked by a panic elsewhere is never reused.
		defer func() {
			if p.done {
				putWorker(w)
			}
		}()
		p.wait()
	}
	for anyParked(ps) {
		flush(ctx)
		for _, p := range ps {
			if p.parked {
				p.parked = false
				p.resume <- struct{}{}
				p.wait()
			}
		}
	}
}

// wait waits for p's coroutine to park or end, and raises its panic.
func (p *parker) wait() {
	<-p.g.stopped
	if p.panicked != nil {
		panic(p.panicked)
	}
}

func anyParked(ps []*parker) bool {
	for _, p := range ps {
		if p.parked {
			return true
		}
	}
	return false
}

// A coroutine runs on a worker goroutine kept for the next group: a
// turn's calls go deep, and a fresh goroutine's stack grew again on every
// turn (a tenth of a simulation's CPU).
type coWorker struct{ tasks chan func() }

// idle holds the workers between groups; one that finds it full ends.
var idle = make(chan *coWorker, 64)

func getWorker() *coWorker {
	select {
	case w := <-idle:
		return w
	default:
	}
	w := &coWorker{tasks: make(chan func())}
	go func() {
		for task := range w.tasks {
			task()
		}
	}()
	return w
}

func putWorker(w *coWorker) {
	select {
	case idle <- w:
	default:
		close(w.tasks)
	}
}
