package simulate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
)

// Queue runs simulations asked for through the API, one at a time (a run
// takes a core), with a short queue, and keeps the latest results in
// memory: a simulation is deterministic, so a result lost to a restart is
// had again by asking again.
type Queue struct {
	clock  clock.Clock
	newID  func() string
	mu     sync.Mutex
	jobs   map[string]*job
	order  []string // oldest first
	closed bool
	// running: a goroutine takes the queue (it ends when the queue is
	// empty, so an idle Queue holds none).
	running bool
	wg      sync.WaitGroup
}

// Job statuses.
const (
	Queued    = "queued"
	Running   = "running"
	Done      = "done"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Limits of Queue.
const (
	// MaxQueued simulations wait behind the running one; more are refused.
	MaxQueued = 4
	// MaxKept is how many simulations (finished or not) are kept; the
	// oldest finished one goes first.
	MaxKept = 20
)

// ErrBusy refuses a simulation when MaxQueued already wait.
var ErrBusy = errors.New("simulations: the queue is full")

// Status is what a simulation is at.
type Status struct {
	ID                         string
	Status                     string
	Error                      string
	Created, Started, Finished time.Time
	Progress                   Progress
	Result                     *Comparison
}

type job struct {
	st     Status
	sc     Scenario
	evs    []Event
	cancel context.CancelFunc
	ctx    context.Context
}

// NewQueue returns an empty queue.
func NewQueue(clk clock.Clock, newID func() string) *Queue {
	return &Queue{clock: clk, newID: newID, jobs: map[string]*job{}}
}

// Close cancels every simulation and waits for the one running.
func (j *Queue) Close() {
	j.mu.Lock()
	j.closed = true
	for _, x := range j.jobs {
		x.cancel()
	}
	j.mu.Unlock()
	j.wg.Wait()
}

// Submit queues a checked scenario and its demand.
func (j *Queue) Submit(sc Scenario, evs []Event) (Status, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return Status{}, errors.New("simulations: shut down")
	}
	waiting := 0
	for _, x := range j.jobs {
		if x.st.Status == Queued {
			waiting++
		}
	}
	if waiting >= MaxQueued {
		return Status{}, ErrBusy
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &job{st: Status{ID: j.newID(), Status: Queued, Created: j.clock.Now(), Progress: Progress{Total: sc.Horizon.D}},
		sc: sc, evs: evs, ctx: ctx, cancel: cancel}
	j.jobs[x.st.ID] = x
	j.order = append(j.order, x.st.ID)
	j.forget()
	if !j.running {
		j.running = true
		j.wg.Go(j.run)
	}
	return x.st, nil
}

// forget drops the oldest finished simulations beyond MaxKept; j.mu held.
func (j *Queue) forget() {
	for i := 0; len(j.order) > MaxKept && i < len(j.order); {
		x := j.jobs[j.order[i]]
		if x.st.Status == Queued || x.st.Status == Running {
			i++
			continue
		}
		delete(j.jobs, j.order[i])
		j.order = append(j.order[:i], j.order[i+1:]...)
	}
}

// Get is a simulation's status, with its result once done.
func (j *Queue) Get(id string) (Status, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	x, ok := j.jobs[id]
	if !ok {
		return Status{}, false
	}
	return x.st, true
}

// List is every simulation kept, newest first, without results.
func (j *Queue) List() []Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Status, 0, len(j.order))
	for i := len(j.order) - 1; i >= 0; i-- {
		st := j.jobs[j.order[i]].st
		st.Result = nil
		out = append(out, st)
	}
	return out
}

// Cancel stops a queued or running simulation; one that ended stays as
// it is.
func (j *Queue) Cancel(id string) (Status, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	x, ok := j.jobs[id]
	if !ok {
		return Status{}, false
	}
	if x.st.Status == Queued {
		x.st.Status, x.st.Finished = Cancelled, j.clock.Now()
	}
	x.cancel()
	return x.st, true
}

// run takes the queued simulations one at a time, oldest first, until
// none is left.
func (j *Queue) run() {
	for x := j.next(); x != nil; x = j.next() {
		j.runOne(x)
	}
}

// next marks the oldest queued simulation running and returns it; nil
// (and the runner ends) when none is queued.
func (j *Queue) next() *job {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range j.order {
		if x := j.jobs[id]; x.st.Status == Queued && !j.closed {
			x.st.Status, x.st.Started = Running, j.clock.Now()
			return x
		}
	}
	j.running = false
	return nil
}

func (j *Queue) runOne(x *job) {
	c, err := Compare(x.ctx, x.sc, x.evs, func(p Progress) {
		j.mu.Lock()
		x.st.Progress = p
		j.mu.Unlock()
	})
	j.mu.Lock()
	defer j.mu.Unlock()
	x.st.Finished = j.clock.Now()
	switch {
	case x.ctx.Err() != nil:
		x.st.Status = Cancelled
	case err != nil:
		x.st.Status, x.st.Error = Failed, fmt.Sprint(err)
	default:
		x.st.Status, x.st.Result = Done, c
	}
	x.cancel()
	x.sc, x.evs = Scenario{}, nil
}
