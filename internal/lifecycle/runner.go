package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/random"
)

// TurnFunc runs one turn of key's work and says when the key is due
// next. On an error its Due still counts for By and Pool.
type TurnFunc func(ctx context.Context, key string) (Due, error)

// RunnerConfig of a Runner.
type RunnerConfig struct {
	Clock  clock.Clock
	Random *random.Source
	// Backoff of a failed step.
	Backoff backoff.Policy
	// Pools is how many workers each pool has (index: Pool); a pool
	// missing or of zero size gets one.
	Pools []int
	// Flush, if set, commits what the turns of an inline group parked
	// (see group.go); without it inline turns run one after another.
	Flush func(context.Context)
}

// Runner runs keys' steps when they are due (see the package doc).
type Runner struct {
	cfg     RunnerConfig
	step    TurnFunc
	backoff *backoff.Keyed

	mu      sync.Mutex
	q       queue            // keys waiting for their time
	ready   [][]*item        // per pool: due, waiting for a worker
	queued  map[string]*item // in q or in ready
	running map[string]bool  // claimed: a step (or a Claim) is going on
	again   map[string]Due   // added while running
	active  bool             // Run is on: due keys go to the workers
	work    []*sync.Cond     // per pool: ready has keys
	wake    chan struct{}    // the timer must look again
}

// item is one queued key.
type item struct {
	key   string
	due   Due
	idx   int  // in q; -1 when in ready
	ready bool // in ready
}

// NewRunner returns a runner of step.
func NewRunner(cfg RunnerConfig, step TurnFunc) *Runner {
	if cfg.Random == nil {
		cfg.Random = random.FromEntropy()
	}
	r := &Runner{cfg: cfg, step: step, backoff: backoff.NewKeyed(cfg.Backoff, cfg.Random),
		queued: map[string]*item{}, running: map[string]bool{}, again: map[string]Due{},
		wake: make(chan struct{}, 1)}
	n := max(len(cfg.Pools), 1)
	r.ready = make([][]*item, n)
	for range n {
		r.work = append(r.work, sync.NewCond(&r.mu))
	}
	return r
}

// pool is p, or the first pool if there is no such pool.
func (r *Runner) pool(p Pool) Pool {
	if int(p) < 0 || int(p) >= len(r.ready) {
		return 0
	}
	return p
}

// Add schedules key's step at d.At (at once if zero or past), unless it
// is already due earlier; never before the backoff of its last failure
// ends. A key whose step is running runs again once the step ends.
func (r *Runner) Add(key string, d Due) {
	now := r.cfg.Clock.Now()
	if d.At.IsZero() || d.At.Before(now) {
		d.At = now
	}
	if nb := r.notBefore(key, d.By); d.At.Before(nb) {
		d.At = nb
	}
	d.Pool = r.pool(d.Pool)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[key] {
		if a, ok := r.again[key]; !ok || d.At.Before(a.At) {
			r.again[key] = d
		}
		return
	}
	r.schedule(key, d, now)
}

// Ensure is Add for a key the runner does not hold (queued or running);
// a key it holds keeps its time. A backstop that hands the runner every
// key it should hold (controller's resync) then catches the ones it
// lost without pulling every other one forward, which would shift their
// polls and run them all in one burst.
func (r *Runner) Ensure(key string, d Due) {
	r.mu.Lock()
	_, queued := r.queued[key]
	held := queued || r.running[key]
	r.mu.Unlock()
	if !held {
		r.Add(key, d)
	}
}

// schedule queues key at d.At, keeping an earlier time it is queued at;
// r.mu is held.
func (r *Runner) schedule(key string, d Due, now time.Time) {
	it, ok := r.queued[key]
	switch {
	case !ok:
		it = &item{key: key, due: d, idx: -1}
		r.queued[key] = it
	case it.ready:
		return // due already
	case !d.At.Before(it.due.At):
		it.due.By, it.due.Pool = d.By, d.Pool
		return
	default:
		it.due = d
	}
	if r.active && !d.At.After(now) {
		if it.idx >= 0 {
			r.q.remove(it)
		}
		r.toReady(it)
		return
	}
	if it.idx >= 0 {
		r.q.fix(it)
	} else {
		r.q.push(it)
	}
	if it.idx == 0 {
		r.poke()
	}
}

// toReady hands it to its pool's workers; r.mu is held.
func (r *Runner) toReady(it *item) {
	it.ready = true
	p := it.due.Pool
	r.ready[p] = append(r.ready[p], it)
	r.work[p].Signal()
}

// poke tells the timer its earliest key changed.
func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Wake makes key due at at (now if zero or past) if that is earlier than
// it is queued for, keeping its pool and the By it answered; a key not
// queued is added in the Workers pool, and a key whose turn is running
// runs again once it ends. It is how a driver's word that something
// changed for one node reaches that node alone.
func (r *Runner) Wake(key string, at time.Time) {
	now := r.cfg.Clock.Now()
	if at.IsZero() || at.Before(now) {
		at = now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[key] {
		if a, ok := r.again[key]; !ok || at.Before(a.At) {
			a.At = at
			r.again[key] = a
		}
		return
	}
	d := Due{At: at}
	if it, ok := r.queued[key]; ok {
		d.By, d.Pool = it.due.By, it.due.Pool
	}
	if nb := r.notBefore(key, d.By); d.At.Before(nb) {
		d.At = nb
	}
	r.schedule(key, d, now)
}

// Reset forgets every queued key (a new term of leadership starts from
// what the store says); backoffs and claims stay.
func (r *Runner) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q = r.q[:0]
	for i := range r.ready {
		r.ready[i] = nil
	}
	clear(r.queued)
	clear(r.again)
}

// Len is how many keys are queued.
func (r *Runner) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queued)
}

// Claim marks key as running, false if a step of it (or another claim)
// is going on; Release ends the claim, and runs the key again if it was
// added meanwhile.
func (r *Runner) Claim(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[key] {
		return false
	}
	r.running[key] = true
	return true
}

// Release ends a claim.
func (r *Runner) Release(key string) {
	r.finish(key, Due{}, false)
}

// Retry is key's backoff after a failed step.
func (r *Runner) Retry(key string) backoff.Retry { return r.backoff.Retry(key) }

// Err is the error of key's last step if it failed.
func (r *Runner) Err(key string) error { return r.backoff.Err(key) }

// notBefore is when key, due by by, may run again after its failures.
func (r *Runner) notBefore(key string, by time.Time) time.Time {
	rt := r.backoff.Retry(key)
	if !by.IsZero() && rt.FailedAt.Before(by) && rt.At.After(by) {
		return by
	}
	return rt.At
}

// result records a step's outcome and returns when the key runs next.
func (r *Runner) result(key string, d Due, err error) Due {
	if err != nil {
		r.backoff.Fail(key, r.cfg.Clock.Now(), err)
		d.At = r.notBefore(key, d.By)
		return d
	}
	r.backoff.OK(key)
	return d
}

// finish releases key and queues it at next (if next.At is set) or, if it
// was added while it ran, at that time; after a failure (failed) the
// backoff holds: a key added meanwhile waits for it too.
func (r *Runner) finish(key string, next Due, failed bool) {
	now := r.cfg.Clock.Now()
	if next.At.IsZero() {
		next.At = next.By // due by then, unless woken first
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, key)
	a, added := r.again[key]
	delete(r.again, key)
	if added && !failed && (next.At.IsZero() || a.At.Before(next.At)) {
		next = a
	}
	if added && failed && next.At.IsZero() {
		next = a
	}
	if next.At.IsZero() {
		return
	}
	next.Pool = r.pool(next.Pool)
	r.schedule(key, next, now)
}

// Next is when key's step is queued to run, false if it is not queued or
// a step of it is running.
func (r *Runner) Next(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, ok := r.queued[key]
	if !ok || r.running[key] {
		return time.Time{}, false
	}
	return it.due.At, true
}

// Busy says a step is running, waits for a worker, or is queued for now
// or earlier: what a harness driving Run on a virtual clock waits out
// before it moves the clock on (see controller.Settled).
func (r *Runner) Busy() bool {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.running) > 0 {
		return true
	}
	for _, its := range r.ready {
		if len(its) > 0 {
			return true
		}
	}
	return len(r.q) > 0 && !r.q[0].due.At.After(now)
}
