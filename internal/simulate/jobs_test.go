package simulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
)

func waitStatus(t *testing.T, q *Queue, id string, want ...string) Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, ok := q.Get(id)
		if !ok {
			t.Fatalf("simulation %s is gone", id)
		}
		for _, w := range want {
			if st.Status == w {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulation %s %s, want %v", id, st.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueue: a queued simulation runs and keeps the result a direct run
// gives; a running one cancels; a full queue refuses; old results go.
func TestQueue(t *testing.T) {
	n := 0
	q := NewQueue(clock.Real{}, func() string { n++; return fmt.Sprintf("sim-%d", n) })
	defer q.Close()
	s := scenario(t)
	s.Horizon.D, s.Compare = 2*time.Hour, nil
	st, err := q.Submit(s, Generate(s))
	if err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, q, st.ID, Done)
	want, err := Compare(context.Background(), s, Generate(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	done.Result.WriteJSON(&a)
	want.WriteJSON(&b)
	if a.String() != b.String() || done.Progress.Done != s.Horizon.D || done.Started.IsZero() || done.Finished.Before(done.Started) {
		t.Fatalf("kept result differs from a direct run, or %+v", done.Progress)
	}

	long := scenario(t)
	long.Horizon.D = 300 * 24 * time.Hour
	run, _ := q.Submit(long, Generate(long))
	waitStatus(t, q, run.ID, Running)
	var queued []Status
	for range MaxQueued {
		st, err := q.Submit(s, Generate(s))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, st)
	}
	if _, err := q.Submit(s, Generate(s)); !errors.Is(err, ErrBusy) {
		t.Fatalf("a fifth queued simulation: %v", err)
	}
	if st, _ := q.Cancel(queued[0].ID); st.Status != Cancelled {
		t.Errorf("a queued simulation cancelled: %s", st.Status)
	}
	q.Cancel(run.ID)
	if st := waitStatus(t, q, run.ID, Cancelled, Done); st.Status != Cancelled || st.Result != nil {
		t.Errorf("a cancelled run: %s", st.Status)
	}
	for _, x := range queued[1:] {
		waitStatus(t, q, x.ID, Done)
	}
	if l := q.List(); len(l) != 6 || l[0].ID != queued[len(queued)-1].ID || l[0].Result != nil {
		t.Errorf("list: %d kept, newest %s", len(l), l[0].ID)
	}
	for range MaxKept {
		x, err := q.Submit(s, Generate(s))
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, q, x.ID, Done)
	}
	if l := q.List(); len(l) != MaxKept {
		t.Errorf("%d kept, want %d", len(l), MaxKept)
	}
	if _, ok := q.Get(st.ID); ok {
		t.Error("the oldest result was kept past MaxKept")
	}
}
