package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// removing returns a ready node made removing, as a drain's end leaves it.
func (s *spec) removing() domain.Node {
	n := s.readyNode()
	n.State, n.RemovedAt, n.Outcome = domain.NodeRemoving, s.clk.Now(), domain.OutcomeEarly
	s.put(n)
	return n
}

func TestRemoveWipesTheMachineAndHandsItOn(t *testing.T) {
	s := newSpec(t)
	n := s.removing()
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || len(s.world.handed) != 1 || s.world.moves != 1 {
		t.Fatalf("%+v, handed %v, moves %d", got, s.world.handed, s.world.moves)
	}
}

// slowWipe is a machine provider whose wipe takes two calls.
type slowWipe struct {
	calls int
	fail  error
}

func (w *slowWipe) Prepare(context.Context, domain.Machine, driver.NodeSpec) (bool, error) {
	return true, nil
}

func (w *slowWipe) Wipe(context.Context, domain.Machine, string, string) (bool, error) {
	w.calls++
	return w.calls >= 2, w.fail
}

func TestAMachineIsHandedOnOnlyOnceItsWipeIsDone(t *testing.T) {
	s := newSpec(t)
	s.use(&slowWipe{})
	n := s.removing()
	got, due := s.mustStep(n.ID)
	if got.State != domain.NodeRemoving || len(s.world.handed) != 0 {
		t.Fatalf("handed on before the wipe is done: %+v", got)
	}
	// A provider that cannot tell when it is done is asked again.
	if !due.At.Equal(s.clk.Now().Add(time.Second)) {
		t.Fatalf("due %+v, want a poll", due)
	}
	if got, _ := s.mustStep(n.ID); got.State != domain.NodeRemoved {
		t.Fatalf("after the wipe: %+v", got)
	}
}

func TestAFailedWipeIsTheProvidersErrorAndKeepsTheMachine(t *testing.T) {
	s := newSpec(t)
	s.use(&slowWipe{fail: errors.New("hook exited 3")})
	n := s.removing()
	_, _, err := s.step(n.ID)
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Reason != domain.ReasonDeprovisionFailed || len(s.world.handed) != 0 {
		t.Fatalf("%v, handed %v", err, s.world.handed)
	}
	if e := s.events(n.ID, domain.ReasonDeprovisionFailed); len(e) != 1 || s.world.errs[n.ID] == "" {
		t.Fatalf("the provider's failure is not on the node: events %+v, last error %q", e, s.world.errs[n.ID])
	}
}

func TestAStaleCopyNeverWipesAMachineHandedOn(t *testing.T) {
	s := newSpec(t)
	w := &slowWipe{}
	s.use(w)
	n := s.removing()
	s.world.busy[n.MachineID] = true
	if _, _, err := s.step(n.ID); err != nil || w.calls != 0 {
		t.Fatalf("wiped %d times a machine another node has (%v)", w.calls, err)
	}
}

func TestANodeRemovedBeforeRemovedAtExistedIsCleanupNow(t *testing.T) {
	s := newSpec(t)
	n := s.removing()
	n.RemovedAt = time.Time{}
	s.put(n)
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || !got.CleanupPending || !got.RemovedAt.Equal(s.clk.Now()) {
		t.Fatalf("%+v", got)
	}
}
