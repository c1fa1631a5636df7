package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
)

// book books a standard cluster of std GPUs from start.
func (h *harness) book(id string, std int, start time.Time) (domain.Cluster, error) {
	return h.c.CreateCluster(h.ctx, domain.Cluster{ID: id, Name: id, ProjectID: "q", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: std, StartsAt: start})
}

// claimed lists the machines claimed by (empty: any claim), with their
// preempt-at times.
func (h *harness) claimed(by string) map[string]time.Time {
	h.t.Helper()
	ms, err := h.st.ListMachines(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, m := range ms {
		if !m.PreemptAt.IsZero() && (by == "" || m.ClaimedBy == by) {
			out[m.ID] = m.PreemptAt
		}
	}
	return out
}

// A fleet of four machines lent whole: one standard node and three
// preemptible ones. A booking of 16 GPUs two hours ahead is accepted,
// claims two of the preemptible nodes' machines at once, tells their
// tenant (PreemptionScheduled, the notice's time) and its own; creates
// that would leave it short are refused naming it; at its ActiveAt the
// claimed nodes get their notice, and the booking is Ready by its start,
// billed from it.
func TestABookingClaimsAheadAndTakesItsMachinesOnTime(t *testing.T) {
	h := newHarness(t, nil, 4)
	h.create("pre", 8, 24)
	h.advance(time.Minute)
	start := h.clk.Now().Add(2 * time.Hour).Truncate(time.Second)
	b, err := h.book("book", 16, start)
	if err != nil {
		t.Fatal(err)
	}
	wantActive := start.Add(-h.c.cfg.DrainWindow - 20*time.Second)
	if b.Status != domain.StatusScheduled || !b.ActiveAt.Equal(wantActive) {
		t.Fatalf("booking %s active at %s, want Scheduled from %s", b.Status, b.ActiveAt, wantActive)
	}
	h.advance(2 * time.Second)
	claims := h.claimed("book")
	if len(claims) != 2 {
		t.Fatalf("the booking claims %v, want two machines", claims)
	}
	told := map[string]bool{}
	for _, n := range h.nodes("pre", domain.NodeReady) {
		if at, ok := claims[n.MachineID]; ok {
			e, found := h.event("pre", n.ID, domain.ReasonPreemptionScheduled)
			if !found || !e.Deadline.Equal(at) || !at.Equal(wantActive) || !strings.Contains(e.Message, "booked from") {
				t.Errorf("node %s: event %+v (found %v), claim at %s", n.Name, e, found, at)
			}
			told[n.ID] = true
			if n.Class != domain.Preemptible {
				t.Errorf("the booking claims the standard node %s", n.Name)
			}
		}
	}
	if len(told) != 2 {
		t.Fatalf("%d claimed nodes told", len(told))
	}
	if e, ok := h.event("book", "", domain.ReasonPreemptionScheduled); !ok || !strings.Contains(e.Message, "claims 2 machines (16 GPUs)") {
		t.Errorf("the booking's tenant was told %+v", e)
	}

	// What would leave it short is refused, with its time named.
	_, err = h.c.CreateCluster(h.ctx, domain.Cluster{ID: "late", Name: "late", ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 16})
	var sf *ShortfallError
	if !errors.As(err, &sf) || !strings.Contains(err.Error(), "booked from "+start.UTC().Format(time.RFC3339)) {
		t.Errorf("a create that leaves the booking short: %v", err)
	}
	if _, err := h.book("second", 16, start.Add(time.Hour)); !errors.As(err, &sf) || !strings.Contains(err.Error(), "at its start") {
		t.Errorf("a second booking the pool cannot hold: %v", err)
	}
	if _, err := h.c.UpdateCluster(h.ctx, "pre", Change{NumGPUs: ptr(24)}); !errors.As(err, &sf) {
		t.Errorf("growing an older cluster over the booking: %v", err)
	}

	// The notice at ActiveAt, to the claimed nodes only.
	h.clk.Step(wantActive.Sub(h.clk.Now()) - time.Second)
	h.reconcile()
	h.advance(2 * time.Second)
	for _, n := range h.nodes("pre") {
		switch {
		case told[n.ID] && (n.DrainStartedAt.IsZero() || n.DrainStartedAt.Sub(wantActive).Abs() > time.Second):
			t.Errorf("claimed node %s: drain started %s, want %s", n.Name, n.DrainStartedAt, wantActive)
		case !told[n.ID] && !n.DrainStartedAt.IsZero():
			t.Errorf("node %s was not claimed but is drained (%s)", n.Name, n.DrainCause)
		}
	}
	h.advance(start.Sub(h.clk.Now()))
	c, err := h.st.GetCluster(h.ctx, "book")
	if err != nil || c.Status != domain.StatusReady {
		t.Fatalf("booking at its start: %+v (%v), want Ready", c.Status, err)
	}
	for _, n := range h.nodes("book", domain.NodeReady) {
		if !n.PeriodStart().Equal(start) || !n.ReadyAt.Before(start) {
			t.Errorf("node %s ready %s, billed from %s; want billed from the start %s", n.Name, n.ReadyAt, n.PeriodStart(), start)
		}
	}
	if len(h.claimed("")) != 0 {
		t.Errorf("claims left once the booking started: %v", h.claimed(""))
	}
}

// A booking cancelled (deleted while Scheduled) lets its claims go, and
// the nodes that were told are told again; a booking moved is claimed for
// its new time.
func TestABookingMovedOrCancelledTellsTheNodes(t *testing.T) {
	h := newHarness(t, nil, 2)
	h.create("pre", 8, 8)
	h.advance(time.Minute)
	start := h.clk.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := h.book("book", 8, start); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Second)
	pre := h.onlyNode("pre", domain.Preemptible)
	if len(h.claimed("book")) != 1 {
		t.Fatalf("claims %v", h.claimed("book"))
	}
	moved, err := h.c.MoveBooking(h.ctx, "book", start.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Second)
	if at := h.claimed("book")[pre.MachineID]; !at.Equal(moved.ActiveAt) || !moved.ActiveAt.After(start) {
		t.Errorf("moved to %s: claim at %s", moved.ActiveAt, at)
	}
	if e, _ := h.event("pre", pre.ID, domain.ReasonPreemptionScheduled); !e.Deadline.Equal(moved.ActiveAt) {
		t.Errorf("the node was told %+v after the move", e)
	}
	if _, err := h.c.DeleteCluster(h.ctx, "book"); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Second)
	if len(h.claimed("")) != 0 {
		t.Errorf("claims left after the cancel: %v", h.claimed(""))
	}
	if _, ok := h.event("pre", pre.ID, domain.ReasonPreemptionCancelled); !ok {
		t.Errorf("the node was not told of the cancel: %+v", h.events("pre"))
	}
	h.advance(4 * time.Hour)
	if n := h.node(pre.ID); n.State != domain.NodeReady {
		t.Errorf("the node of a cancelled booking is %s", n.State)
	}
}

// A machine booked for maintenance tells its node a drain window ahead of
// the maintenance, and goes out of service then.
func TestMaintenanceBookedAhead(t *testing.T) {
	h := newHarness(t, nil, 2)
	h.create("pre", 8, 8)
	h.advance(time.Minute)
	pre := h.onlyNode("pre", domain.Preemptible)
	at := h.clk.Now().Add(time.Hour).Truncate(time.Second)
	m, err := h.st.GetMachine(h.ctx, pre.MachineID)
	if err != nil {
		t.Fatal(err)
	}
	m.MaintenanceAt = at
	h.update(func(tx store.Tx) error { return tx.UpdateMachine(h.ctx, m) })
	h.c.ClaimsNow()
	h.advance(2 * time.Second)
	notice := at.Add(-h.c.cfg.DrainWindow)
	if got := h.claimed("")[m.ID]; !got.Equal(notice) {
		t.Fatalf("maintenance claim at %s, want %s", got, notice)
	}
	if e, ok := h.event("pre", pre.ID, domain.ReasonPreemptionScheduled); !ok || !e.Deadline.Equal(notice) || !strings.Contains(e.Message, "maintenance") {
		t.Errorf("the node was told %+v", e)
	}
	h.clk.Step(notice.Sub(h.clk.Now()) - time.Second)
	h.reconcile()
	h.advance(2 * time.Second)
	if n := h.node(pre.ID); n.DrainStartedAt.IsZero() || n.DrainStartedAt.Sub(notice).Abs() > time.Second {
		t.Errorf("node %s %s, drain started %s; want its notice at %s", n.Name, n.State, n.DrainStartedAt, notice)
	}
	if m, _ := h.st.GetMachine(h.ctx, m.ID); !m.OutOfService || !strings.Contains(m.OutOfServiceReason, "maintenance") {
		t.Errorf("machine %+v: want out of service for its maintenance", m)
	}
}

func ptr[T any](v T) *T { return &v }

// hangingAnnouncer is a cluster whose API never answers the
// announcement of a coming notice (driver.Announcer).
type hangingAnnouncer struct {
	*sim.Fleet
	calls atomic.Int64
}

func (a *hangingAnnouncer) Announce(ctx context.Context, clusterID, nodeName string, at time.Time) error {
	a.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// The announcement is a courtesy: with the cluster's API hanging on it,
// the claimed node's notice still comes at the booking's ActiveAt.
func TestAHangingAnnouncementDelaysNoNotice(t *testing.T) {
	h := newHarness(t, nil, 2)
	a := &hangingAnnouncer{Fleet: h.sim}
	c := New(h.st, a, h.sim, h.clk, h.cfg, nil)
	c.NewID = h.c.NewID
	h.c = c
	h.run()
	h.create("pre", 8, 8)
	h.until("the preemptible node", func() bool { return len(h.nodes("pre", domain.NodeReady)) == 2 })
	pre := h.onlyNode("pre", domain.Preemptible)
	b, err := h.book("book", 8, h.clk.Now().Add(6*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h.until("the announcement, hanging", func() bool { return a.calls.Load() > 0 })
	h.stepTo(b.ActiveAt.Add(time.Second))
	h.wait("the notice", func() bool { return !h.node(pre.ID).DrainStartedAt.IsZero() })
	if n := h.node(pre.ID); n.DrainStartedAt.Sub(b.ActiveAt).Abs() > time.Second {
		t.Errorf("notice at %s, the booking's ActiveAt is %s", n.DrainStartedAt, b.ActiveAt)
	}
}
