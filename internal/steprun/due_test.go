package steprun

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
	r := New(Config{Clock: clk, Random: random.New(1), Backoff: policy}, s.step)
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
