package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/random"
)

// ExecutorConfig configures an Executor. Zero values take the defaults.
type ExecutorConfig struct {
	Steps  Config
	Clock  clock.Clock
	Random *random.Source
	// Workers and NoticeWorkers size the pools turns run in when Run runs
	// them (see Pool).
	Workers, NoticeWorkers int
	// Instant: the drivers answer at once (the simulated fleet on a
	// virtual clock), so calls are not cut off: no timer per call.
	Instant bool
	Log     *slog.Logger
}

// Backoff is the retry schedule of a failed turn: doubling from 250 ms to
// 5 s, each wait drawn between half and all of it, so the turns of many
// nodes on one cluster whose API went away do not come back in lockstep.
var Backoff = backoff.Policy{First: 250 * time.Millisecond, Max: 5 * time.Second, Low: 50, High: 100}

// maxRounds bounds the rounds of one turn: a node's step that keeps
// asking for calls, or a node that keeps changing under the commit, ends
// the turn with an error rather than spin.
const maxRounds = 64

// SaveWorkWait bounds the write of a checkpoint within a notice: at a
// drain's end it goes before the machine's return, and a store that does
// not answer must not hold the node.
const SaveWorkWait = time.Second

// Executor applies the Ready of node steps (see the package doc): it
// owns when each key's turn runs (a Runner), gathers each step's Facts,
// commits its writes through the World, makes its driver calls and feeds
// their answers to the next round.
type Executor struct {
	cfg      ExecutorConfig
	world    World
	cluster  driver.ClusterDriver
	machines driver.MachineProvider
	log      *slog.Logger
	runner   *Runner
	// first is when each provisioning node's first Prepare was accepted
	// (by node ID): in memory, so a new leader gives every machine still
	// preparing one fresh window, which never fails a node for time it
	// spent queued. saved holds the draining nodes whose checkpoint within
	// the notice is recorded, so it is written once.
	first, saved sync.Map
}

// NewExecutor returns the executor of world's nodes over cluster and
// machines.
func NewExecutor(world World, cluster driver.ClusterDriver, machines driver.MachineProvider, cfg ExecutorConfig) *Executor {
	cfg.Steps.defaults()
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{cfg: cfg, world: world, cluster: cluster, machines: machines, log: cfg.Log}
	rc := RunnerConfig{Clock: cfg.Clock, Random: cfg.Random, Backoff: Backoff,
		Pools: []int{Workers: cfg.Workers, Notices: cfg.NoticeWorkers}}
	if g, ok := world.(Grouper); ok {
		rc.Flush = g.Flush
	}
	e.runner = NewRunner(rc, e.turn)
	return e
}

// Config returns the steps' effective configuration.
func (e *Executor) Config() Config { return e.cfg.Steps }

// Runner is the executor's runner: when each key's turn runs.
func (e *Executor) Runner() *Runner { return e.runner }

// turn is one turn of key (a node, or a node's cleanup): rounds of its
// step until one asks for no calls. See the package doc.
func (e *Executor) turn(ctx context.Context, key string) (Due, error) {
	id, cleanup := CleanupOf(key)
	if !cleanup {
		id = key
	}
	t := turnState{cleanup: cleanup}
	defer t.release(e)
	sc := scratchPool.Get().(*turnScratch)
	defer sc.put()
	for round := 0; ; round++ {
		if round == maxRounds {
			return Due{}, fmt.Errorf("node %s: no end after %d rounds of one turn", id, maxRounds)
		}
		n, err := e.world.Node(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			e.forget(id)
			return Due{}, nil // archived: nothing left to do
		}
		if err != nil {
			return Due{}, fmt.Errorf("node %s: %w", id, err)
		}
		t.moved(n)
		in := &sc.in
		*in = Input{Node: n, Now: e.cfg.Clock.Now(), Cleanup: cleanup, Phase: t.phase, Carry: t.carry, Results: t.results}
		if err := e.facts(ctx, in); err != nil {
			return Due{}, fmt.Errorf("node %s: %w", id, err)
		}
		sc.r = Step(e.cfg.Steps, *in)
		r := &sc.r
		if err := e.persist(ctx, n, r); errors.Is(err, ErrStale) {
			t.stale++
			continue // the node changed under the step: the round again, on the node as it is
		} else if err != nil {
			return r.Due, fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
		}
		e.tell(n, r)
		switch {
		case len(r.Calls) > 0:
			t.hold(e, r.Hold)
			t.results = e.act(ctx, n, &in.Facts, r, t.held)
			t.phase, t.carry = r.Next, r.Carry
			continue
		case r.Again:
			t.phase, t.carry, t.results = PhaseStart, Carry{}, nil
			continue
		}
		e.recordFailure(ctx, id, r.Err)
		if r.Err != nil {
			return r.Due, fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, r.Err)
		}
		return r.Due, nil
	}
}

// turnScratch holds a turn's input and step, reused from turn to turn:
// both are a few hundred bytes the world's and drivers' interfaces would
// otherwise take to the heap every round of every node.
type turnScratch struct {
	in Input
	r  Ready
}

var scratchPool = sync.Pool{New: func() any { return new(turnScratch) }}

// put returns sc to the pool, holding nothing of its turn.
func (sc *turnScratch) put() {
	*sc = turnScratch{}
	scratchPool.Put(sc)
}

// turnState is what a turn carries from one round to the next.
type turnState struct {
	cleanup bool
	state   domain.NodeState
	started bool
	phase   Phase
	carry   Carry
	results []Result
	stale   int
	// held is the claim the turn holds for its calls (Ready.Hold), and
	// whether it got it.
	heldKey string
	held    bool
}

// moved starts the turn over when node n moved to another state since
// the last round (the answers of its calls belong to the old state's
// step); a cleanup's rounds go on whatever the node's state.
func (t *turnState) moved(n domain.Node) {
	if t.started && n.State != t.state && !t.cleanup {
		t.phase, t.carry, t.results = PhaseStart, Carry{}, nil
	}
	t.started, t.state = true, n.State
}

// hold takes key's claim for the calls that follow (a drain's end holds
// its node's cleanup key), once; a key already held keeps its claim.
func (t *turnState) hold(e *Executor, key string) {
	if key == t.heldKey {
		return
	}
	t.release(e)
	t.heldKey = key
	if key != "" {
		t.held = e.runner.Claim(key)
	}
}

func (t *turnState) release(e *Executor) {
	if t.heldKey != "" && t.held {
		e.runner.Release(t.heldKey)
	}
	t.heldKey, t.held = "", false
}

// persist commits r's writes (the persist stage), then records what the
// executor remembers of them.
func (e *Executor) persist(ctx context.Context, n domain.Node, r *Ready) error {
	if r.Write != nil || !r.Machine.Empty() || r.HandOver || len(r.Events) > 0 {
		w, err := e.world.Commit(ctx, n, r)
		if err != nil {
			return err
		}
		n = w
	}
	if r.Forget || n.State != domain.NodeProvisioning {
		e.first.Delete(n.ID)
	}
	if n.State != domain.NodeDraining {
		e.saved.Delete(n.ID)
	}
	if !r.SaveWork.IsZero() {
		e.saveWork(ctx, n, r.SaveWork)
	}
	return nil
}

// saveWork records a checkpoint within the notice, once; a courtesy,
// bounded by SaveWorkWait: a failure is logged and tried again on the
// next turn.
func (e *Executor) saveWork(ctx context.Context, n domain.Node, at time.Time) {
	sctx, cancel := context.WithTimeout(ctx, SaveWorkWait)
	defer cancel()
	if err := e.world.SaveWork(sctx, n.ID, at); err != nil {
		e.log.Warn("record a checkpoint within a notice", "node", n.Name, "err", err)
		return
	}
	e.saved.Store(n.ID, true)
}

// tell reports r's observations and moves, and logs its failed
// courtesies (the tell stage).
func (e *Executor) tell(n domain.Node, r *Ready) {
	if len(r.Obs) > 0 {
		e.world.Observe(r.Obs)
	}
	if r.Moved {
		e.world.Moved()
	}
	for _, c := range r.Courtesies {
		log := e.log.Warn
		if errors.Is(c.Err, driver.ErrRefused) {
			log = e.log.Debug // reported once per cluster by the driver
		}
		log("a courtesy failed; the notice goes on without it", "what", c.What, "node", n.Name, "cluster", n.ClusterID, "err", c.Err)
	}
}

// recordFailure keeps a failed turn's error on its node (and, for a
// machine provider's, a lifecycle event), or clears it once a turn
// succeeds; the plan is woken after a failure.
func (e *Executor) recordFailure(ctx context.Context, id string, err error) {
	if ctx.Err() != nil {
		return // cut off by the end of the term
	}
	n, nerr := e.world.Node(ctx, id)
	if nerr != nil {
		return
	}
	if err == nil {
		if n.LastError != "" {
			e.world.Failed(ctx, n, "", "")
		}
		return
	}
	var reason domain.EventReason
	if pe := (*ProviderError)(nil); errors.As(err, &pe) {
		reason = pe.Reason
	}
	msg := fmt.Sprintf("%s node %s of cluster %s: %v", n.State, n.Name, n.ClusterID, err)
	e.log.Warn("node step failed; retrying with backoff", "err", msg)
	e.world.Failed(ctx, n, msg, reason)
	e.world.Moved()
}

// forget drops what the executor remembers of node id.
func (e *Executor) forget(id string) {
	e.first.Delete(id)
	e.saved.Delete(id)
}

// FirstPrepare is when this process's first Prepare of node id was
// accepted; zero if none was, or the node left provisioning.
func (e *Executor) FirstPrepare(id string) time.Time {
	if t, ok := e.first.Load(id); ok {
		return t.(time.Time)
	}
	return time.Time{}
}

// DueOf is how stored node n is due when it is handed to the executor (a
// commit wrote it, a new term began): at once, in the pool its state's
// step runs in and by the time it keeps (a drain's deadline, a
// registration deadline).
func (e *Executor) DueOf(n domain.Node) Due {
	switch n.State {
	case domain.NodeDraining:
		d := Due{By: n.Deadline, Pool: Workers}
		if !n.Notified {
			d.Pool = Notices
		}
		return d
	case domain.NodeProvisioning:
		return Due{By: RegisterBy(e.cfg.Steps, n, e.FirstPrepare(n.ID))}
	}
	return Due{}
}
