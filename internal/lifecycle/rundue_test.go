package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/random"
)

// TestRunDueOnAVirtualClock: a simulator jumps the clock to Earliest and
// runs what is due there, by due time then key; a step's answer
// queues it again, and nothing runs before its time.
func TestRunDueOnAVirtualClock(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newSteps(clk)
	s.answer = func(key string, n int) (Due, error) {
		if key == "b" && n < 3 {
			return Due{At: clk.Now().Add(10 * time.Second)}, nil
		}
		return Due{}, nil
	}
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Backoff: policy}, s.step)
	if _, ok := r.Earliest(); ok {
		t.Fatal("an empty runner has something due")
	}
	r.Add("b", Due{At: t0.Add(5 * time.Second)})
	r.Add("a", Due{At: t0.Add(15 * time.Second)})
	r.Add("c", Due{At: t0.Add(5 * time.Second)})
	if errs := r.RunDue(context.Background()); len(errs) != 0 || len(s.runs) != 0 {
		t.Fatalf("ran %v (%v) before anything was due", s.runs, errs)
	}
	var at []string
	for range 10 {
		next, ok := r.Earliest()
		if !ok {
			break
		}
		clk.Set(next)
		before := len(s.runs)
		r.RunDue(context.Background())
		at = append(at, fmt.Sprintf("%s:%v", next.Sub(t0), s.runs[before:]))
	}
	if got, want := fmt.Sprint(at), "[5s:[b c] 15s:[a b] 25s:[b]]"; got != want {
		t.Errorf("ran %s, want %s", got, want)
	}
	if r.Len() != 0 {
		t.Errorf("%d keys still queued", r.Len())
	}
}

// TestEnsureKeepsAHeldKeysTime: Ensure queues a key the runner does not
// hold, and leaves one it holds at its time (a backstop must not pull a
// poll forward); Busy says whether anything is due now.
func TestEnsureKeepsAHeldKeysTime(t *testing.T) {
	clk := clock.NewFake(t0)
	r := NewRunner(RunnerConfig{Clock: clk, Random: random.New(1), Backoff: policy}, newSteps(clk).step)
	r.Add("a", Due{At: t0.Add(10 * time.Second)})
	r.Ensure("a", Due{})
	r.Ensure("b", Due{At: t0.Add(20 * time.Second)})
	if at, ok := r.Earliest(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("after Ensure of a held key, Earliest = %v, %v; want its own 10s", at, ok)
	}
	if r.Busy() {
		t.Fatal("busy with nothing due")
	}
	r.Add("a", Due{}) // Add pulls it forward: due now
	if !r.Busy() {
		t.Fatal("not busy with a key due now")
	}
	r.RunDue(context.Background())
	if at, ok := r.Earliest(); r.Busy() || !ok || !at.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("after the run, busy %v, Earliest = %v, %v; want b at 20s", r.Busy(), at, ok)
	}
}
