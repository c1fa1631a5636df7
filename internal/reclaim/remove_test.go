package reclaim

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
	s.port.mu.Lock()
	s.port.nodes[n.ID] = n
	s.port.mu.Unlock()
	return n
}

func TestRemoveWipesTheMachineAndHandsItOn(t *testing.T) {
	s := newSpec(t)
	n := s.removing()
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || len(s.port.handed) != 1 || s.port.kicks != 1 {
		t.Fatalf("%+v, handed %v, kicks %d", got, s.port.handed, s.port.kicks)
	}
}

// slowWipe is a machine provider whose wipe takes two calls.
type slowWipe struct {
	*spec
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
	w := &slowWipe{spec: s}
	s.m = New(s.port, s.api, w, s.clk, Config{}, nil)
	n := s.removing()
	if got, _ := s.mustStep(n.ID); got.State != domain.NodeRemoving || len(s.port.handed) != 0 {
		t.Fatalf("handed on before the wipe is done: %+v", got)
	}
	if got, _ := s.mustStep(n.ID); got.State != domain.NodeRemoved {
		t.Fatalf("after the wipe: %+v", got)
	}
}

func TestAFailedWipeIsTheProvidersErrorAndKeepsTheMachine(t *testing.T) {
	s := newSpec(t)
	s.m = New(s.port, s.api, &slowWipe{spec: s, fail: errors.New("hook exited 3")}, s.clk, Config{}, nil)
	n := s.removing()
	_, _, err := s.step(n.ID)
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Reason != domain.ReasonDeprovisionFailed || len(s.port.handed) != 0 {
		t.Fatalf("%v, handed %v", err, s.port.handed)
	}
}

func TestAStaleCopyNeverWipesAMachineHandedOn(t *testing.T) {
	s := newSpec(t)
	w := &slowWipe{spec: s}
	s.m = New(s.port, s.api, w, s.clk, Config{}, nil)
	n := s.removing()
	s.port.others[n.MachineID] = "n-other"
	if _, err := s.m.Remove(s.ctx, n); err != nil || w.calls != 0 {
		t.Fatalf("wiped %d times a machine another node has (%v)", w.calls, err)
	}
}

func TestANodeRemovedBeforeRemovedAtExistedIsCleanupNow(t *testing.T) {
	s := newSpec(t)
	n := s.removing()
	n.RemovedAt = time.Time{}
	s.port.nodes[n.ID] = n
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || !got.CleanupPending || !got.RemovedAt.Equal(s.clk.Now()) {
		t.Fatalf("%+v", got)
	}
}
