package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/random"
)

// steps is a Step that records its runs and answers what a test set.
type steps struct {
	clk  *clock.Fake
	mu   sync.Mutex
	runs []string
	ran  chan string
	// answer is the Due and error of a key's step (zero: done).
	answer func(key string, n int) (Due, error)
	count  map[string]int
}

func newSteps(clk *clock.Fake) *steps {
	return &steps{clk: clk, ran: make(chan string, 1000), count: map[string]int{},
		answer: func(string, int) (Due, error) { return Due{}, nil }}
}

func (s *steps) step(_ context.Context, key string) (Due, error) {
	s.mu.Lock()
	s.count[key]++
	n := s.count[key]
	s.runs = append(s.runs, key)
	s.mu.Unlock()
	d, err := s.answer(key, n)
	s.ran <- key
	return d, err
}

func (s *steps) wait(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-s.ran:
		if got != want {
			t.Fatalf("ran %s, want %s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s never ran", want)
	}
}

// settled waits until no step of key runs: a step tells the test it ran
// before the runner records its outcome.
func settled(r *Runner, key string) {
	for !r.Claim(key) {
		time.Sleep(100 * time.Microsecond)
	}
	r.Release(key)
}

func (s *steps) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-s.ran:
		t.Fatalf("%s ran, nothing was due", got)
	case <-time.After(50 * time.Millisecond):
	}
}

func start(t *testing.T, r *Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

var policy = backoff.Policy{First: time.Second, Max: 8 * time.Second}

func TestStepRunsWhenDueAndAtTheTimeItAnswers(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	s.answer = func(key string, n int) (Due, error) {
		if n == 1 {
			return Due{At: clk.Now().Add(10 * time.Second)}, nil
		}
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Backoff: policy}, s.step)
	start(t, r)
	r.Add("a", Due{At: t0.Add(5 * time.Second)})
	s.none(t)
	clk.Step(5 * time.Second)
	s.wait(t, "a")
	settled(r, "a")
	clk.Step(9 * time.Second)
	s.none(t)
	clk.Step(time.Second)
	s.wait(t, "a")
	clk.Step(time.Hour)
	s.none(t)
	if r.Len() != 0 {
		t.Errorf("%d keys queued after the last step said done", r.Len())
	}
}

func TestEarlierAddWins(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1)}, s.step)
	start(t, r)
	r.Add("a", Due{At: t0.Add(time.Minute)})
	r.Add("a", Due{At: t0.Add(time.Second)})
	r.Add("a", Due{At: t0.Add(time.Hour)})
	clk.Step(time.Second)
	s.wait(t, "a")
	clk.Step(time.Hour)
	s.none(t)
}

func TestFailedStepBacksOffButNotPastBy(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	boom := errors.New("boom")
	by := t0.Add(5 * time.Second)
	s.answer = func(key string, n int) (Due, error) {
		if n <= 4 {
			return Due{By: by}, boom
		}
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Backoff: policy}, s.step)
	start(t, r)
	r.Add("a", Due{})
	s.wait(t, "a")
	settled(r, "a") // fails at t0: again at +1s
	clk.Step(999 * time.Millisecond)
	s.none(t)
	clk.Step(time.Millisecond)
	s.wait(t, "a")
	settled(r, "a") // fails at +1s: again at +3s
	if !errors.Is(r.Err("a"), boom) {
		t.Errorf("Err: %v", r.Err("a"))
	}
	clk.Step(2 * time.Second)
	s.wait(t, "a")
	settled(r, "a") // fails at +3s: the backoff says +7s, By +5s
	clk.Step(2 * time.Second)
	s.wait(t, "a")
	settled(r, "a") // at By; fails after By: the backoff holds (+5s + 8s)
	clk.Step(7 * time.Second)
	s.none(t)
	clk.Step(time.Second)
	s.wait(t, "a")
	settled(r, "a")
	if r.Err("a") != nil || r.Retry("a") != (backoff.Retry{}) {
		t.Errorf("a success did not clear the backoff: %v %+v", r.Err("a"), r.Retry("a"))
	}
}

func TestAddedWhileRunningRunsAgain(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	inStep, release := make(chan struct{}), make(chan struct{})
	s.answer = func(key string, n int) (Due, error) {
		if n == 1 {
			close(inStep)
			<-release
		}
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1)}, s.step)
	start(t, r)
	r.Add("a", Due{})
	<-inStep
	r.Add("a", Due{})
	if r.Claim("a") {
		t.Fatal("a second claim of a running key")
	}
	close(release)
	s.wait(t, "a")
	s.wait(t, "a")
	s.none(t)
}

func TestOneStepOfAKeyAtATime(t *testing.T) {
	clk := clock.NewFake(t0)
	var inside, most atomic.Int64
	step := func(_ context.Context, key string) (Due, error) {
		if n := inside.Add(1); n > most.Load() {
			most.Store(n)
		}
		time.Sleep(100 * time.Microsecond)
		inside.Add(-1)
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Pools: []int{8}}, step)
	start(t, r)
	for range 2000 {
		r.Add("same", Due{})
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Len() > 0 || inside.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the runner did not drain its queue")
		}
		time.Sleep(time.Millisecond)
	}
	if most.Load() != 1 {
		t.Errorf("%d steps of one key ran at once", most.Load())
	}
}

// TestWakeMakesOneKeyDueKeepingItsPoolAndBy: a driver's word about one
// node wakes that node alone, earlier only, and its By still holds.
func TestWakeMakesOneKeyDueKeepingItsPoolAndBy(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Pools: []int{1, 1}}, s.step)
	r.Add("drain", Due{At: t0.Add(time.Minute), By: t0.Add(5 * time.Minute), Pool: Notices})
	r.Add("other", Due{At: t0.Add(time.Minute)})
	r.Wake("drain", t0.Add(2*time.Minute)) // later: changes nothing
	if at, _ := r.Next("drain"); !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a later wake moved the key to %s", at)
	}
	r.Wake("drain", time.Time{})
	r.mu.Lock()
	it := r.queued["drain"]
	got := it.due
	r.mu.Unlock()
	if !got.At.Equal(t0) || !got.By.Equal(t0.Add(5*time.Minute)) || got.Pool != Notices {
		t.Fatalf("woken: %+v", got)
	}
	start(t, r)
	s.wait(t, "drain")
	s.none(t)
	clk.Step(time.Minute)
	s.wait(t, "other")
}

// TestAKeyDueOnlyByRunsAtBy: a turn that waits to be woken (zero At) runs
// at its By all the same.
func TestAKeyDueOnlyByRunsAtBy(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	s.answer = func(key string, n int) (Due, error) {
		if n == 1 {
			return Due{By: t0.Add(time.Minute)}, nil
		}
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1)}, s.step)
	r.Add("k", Due{})
	if errs := r.RunDue(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	if at, ok := r.Earliest(); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("due %s %v, want its By", at, ok)
	}
}

func TestPoolsDoNotWaitForEachOther(t *testing.T) {
	clk := clock.NewFake(t0)
	block := make(chan struct{})
	defer close(block)
	got := make(chan string, 10)
	step := func(_ context.Context, key string) (Due, error) {
		if key == "slow" {
			<-block
		}
		got <- key
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Pools: []int{1, 1}}, step)
	start(t, r)
	r.Add("slow", Due{Pool: 0})
	r.Add("queued", Due{Pool: 0})
	r.Add("notice", Due{Pool: 1})
	select {
	case k := <-got:
		if k != "notice" {
			t.Fatalf("%s ran first", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second pool waited behind the first")
	}
}

func TestNoGoroutinePerKey(t *testing.T) {
	clk := clock.NewFake(t0)
	release := make(chan struct{})
	var started atomic.Int64
	step := func(_ context.Context, key string) (Due, error) {
		started.Add(1)
		<-release
		return Due{}, nil
	}
	before := runtime.NumGoroutine()
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Pools: []int{4, 2}}, step)
	start(t, r)
	for i := range 10000 {
		r.Add(fmt.Sprint(i), Due{Pool: Pool(i % 2)})
	}
	for started.Load() < 6 {
		runtime.Gosched()
	}
	// The workers (6), the timer, the Run goroutine and its context hook.
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Errorf("%d goroutines for 10,000 due keys and 6 workers", n)
	}
	close(release)
}

func TestRunNowInOrderSkippingBackoff(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	boom := errors.New("boom")
	s.answer = func(key string, n int) (Due, error) {
		if key == "b" {
			return Due{}, boom
		}
		return Due{At: clk.Now().Add(time.Second)}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Backoff: policy}, s.step)
	items := []Item{{Key: "c"}, {Key: "a", Due: Due{By: t0.Add(time.Minute)}}, {Key: "b"}}
	next, errs := r.RunNow(context.Background(), items, true)
	if len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Fatalf("errors %v", errs)
	}
	if want := t0.Add(time.Minute); !next.Equal(want) {
		t.Errorf("next %v, want a's By %v", next, want)
	}
	if fmt.Sprint(s.runs) != "[c a b]" {
		t.Errorf("ran %v, want the items' order", s.runs)
	}
	s.runs = nil
	next, _ = r.RunNow(context.Background(), items, true)
	if fmt.Sprint(s.runs) != "[c a]" {
		t.Errorf("ran %v: b is in its backoff", s.runs)
	}
	if want := t0.Add(time.Second); !next.Equal(want) {
		t.Errorf("next %v, want b's retry %v", next, want)
	}
	clk.Step(time.Second)
	s.runs = nil
	r.RunNow(context.Background(), items, false)
	if len(s.runs) != 3 {
		t.Errorf("ran %v after b's backoff", s.runs)
	}
}

func TestRunNowLeavesAKeyClaimedElsewhere(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1)}, s.step)
	if !r.Claim("a") {
		t.Fatal("claim")
	}
	r.RunNow(context.Background(), []Item{{Key: "a"}}, true)
	if len(s.runs) != 0 {
		t.Fatalf("ran %v under another's claim", s.runs)
	}
	r.Release("a")
	if r.Len() != 1 {
		t.Errorf("the key left while claimed is not queued again after the claim: %d queued", r.Len())
	}
}

func TestNextSaysWhenAKeyIsQueued(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1)}, s.step)
	if _, ok := r.Next("a"); ok {
		t.Fatal("a key never added is queued")
	}
	r.Add("a", Due{At: t0.Add(time.Minute)})
	if at, ok := r.Next("a"); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Next %s %v", at, ok)
	}
}
