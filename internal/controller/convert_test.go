package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

// convertFleet is cluster a with one standard and two preemptible nodes,
// ready, their pods running.
func convertFleet(t *testing.T, machines int) *harness {
	h := newHarness(t, quickPods, machines)
	h.create("a", 8, 16)
	h.reconcile()
	h.advance(30 * time.Second)
	if n := len(h.nodes("a", domain.NodeReady)); n != 3 {
		t.Fatalf("%d ready nodes, want 3", n)
	}
	return h
}

func (h *harness) convert(node string, to domain.ComputeClass) (domain.Node, error) {
	return h.c.ConvertNode(h.ctx, "a", node, to)
}

func (h *harness) usageOf(nodeID string) []domain.UsageRecord {
	h.t.Helper()
	return storetest.NodeUsage(h.t, h.st, h.clk, "a", nodeID)
}

// TestConvertPreemptibleToStandard: a preemptible node converted to
// standard stays where it is, its pods untouched and unnotified; the
// cluster's counts follow; the node carries its new class in the cluster;
// billing splits at the second; and it is never reclaimed after, though
// standard demand takes the other preemptible node.
func TestConvertPreemptibleToStandard(t *testing.T) {
	h := convertFleet(t, 4)
	p := h.nodes("a", domain.NodeReady)[1]
	if p.Class != domain.Preemptible {
		t.Fatalf("node %+v is not preemptible", p)
	}
	h.clk.Step(1500 * time.Millisecond)
	at := h.clk.Now().Truncate(time.Second)
	got, err := h.convert(p.Name, domain.Standard)
	if err != nil {
		t.Fatal(err)
	}
	if got.Class != domain.Standard || got.State != domain.NodeReady || !got.ClassSince.Equal(at) || got.ID != p.ID || got.Name != p.Name {
		t.Fatalf("converted node %+v", got)
	}
	cl, _ := h.st.GetCluster(h.ctx, "a")
	if cl.NumGPUs != 16 || cl.DesiredPreemptibleGPUs != 8 {
		t.Fatalf("counts after conversion: standard %d, preemptible %d; want 16 and 8", cl.NumGPUs, cl.DesiredPreemptibleGPUs)
	}
	if e, ok := h.event("a", p.ID, domain.ReasonNodeConverted); !ok || !strings.Contains(e.Message, "from preemptible to standard") {
		t.Fatalf("conversion event %+v", e)
	}
	h.reconcile() // the sweep it asked for tells the cluster
	v, _ := h.sim.Node("a", p.Name)
	if v.Class != domain.Standard || v.Labels[domain.LabelComputeClass] != "standard" {
		t.Fatalf("the cluster shows class %s, labels %v", v.Class, v.Labels)
	}
	if v.RunningPods() != 1 || v.TerminatingPods() != 0 || v.Unschedulable || len(v.Events) != 0 {
		t.Fatalf("the node's pods or marks were touched: %+v", v)
	}

	// Billing splits at the second of the conversion.
	h.advance(10 * time.Second)
	recs := h.usageOf(p.ID)
	if len(recs) != 2 {
		t.Fatalf("usage of the converted node: %+v, want two periods", recs)
	}
	before, after := recs[0], recs[1]
	if before.Class != domain.Preemptible || !before.Final || !before.Start.Equal(p.ReadyAt) || !before.End.Equal(at) {
		t.Fatalf("preemptible period %+v, want %s to %s, final", before, p.ReadyAt, at)
	}
	if after.Class != domain.Standard || after.Final || !after.Start.Equal(at) || !after.End.Equal(h.clk.Now().Truncate(time.Second)) {
		t.Fatalf("standard period %+v, want from %s, running", after, at)
	}

	// Standard demand takes the other preemptible node, never this one.
	other := h.onlyNode("a", domain.Preemptible)
	h.create("b", 16, 0)
	h.reconcile()
	if n, _ := h.st.GetNode(h.ctx, other.ID); n.State != domain.NodeDraining {
		t.Fatalf("the remaining preemptible node is %s, want draining for b's standard demand", n.State)
	}
	if n, _ := h.st.GetNode(h.ctx, p.ID); n.State != domain.NodeReady {
		t.Fatalf("the converted node is %s, want ready", n.State)
	}
}

// TestConvertStandardToPreemptible: the other way, the counts move back,
// billing splits again, and the cluster's last standard node may not go.
func TestConvertStandardToPreemptible(t *testing.T) {
	h := convertFleet(t, 4)
	p := h.nodes("a", domain.NodeReady)[1]
	h.clk.Step(time.Second)
	if _, err := h.convert(p.ID, domain.Standard); err != nil {
		t.Fatal(err)
	}
	// A node converts at most once a minute (ConvertEvery).
	h.clk.Step(59 * time.Second)
	if _, err := h.convert(p.ID, domain.Preemptible); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "may convert again from") {
		t.Fatalf("converting back within the minute: %v, want a conflict", err)
	}
	h.clk.Step(time.Second)
	at := h.clk.Now()
	got, err := h.convert(p.ID, domain.Preemptible)
	if err != nil || got.Class != domain.Preemptible || !got.ClassSince.Equal(at) {
		t.Fatalf("converted back: %+v, %v", got, err)
	}
	cl, _ := h.st.GetCluster(h.ctx, "a")
	if cl.NumGPUs != 8 || cl.DesiredPreemptibleGPUs != 16 {
		t.Fatalf("counts after converting back: %d, %d", cl.NumGPUs, cl.DesiredPreemptibleGPUs)
	}
	h.reconcile()
	if v, _ := h.sim.Node("a", p.Name); v.Class != domain.Preemptible || v.Labels[domain.LabelComputeClass] != "preemptible" {
		t.Fatalf("the cluster shows %s, labels %v", v.Class, v.Labels)
	}
	recs := h.usageOf(p.ID)
	if len(recs) != 3 || recs[1].Class != domain.Standard || !recs[1].Final || recs[1].End.Sub(recs[1].Start) != time.Minute ||
		recs[2].Class != domain.Preemptible || !recs[2].Start.Equal(at) {
		t.Fatalf("three periods expected, preemptible, a minute standard, preemptible: %+v", recs)
	}

	std := h.onlyNode("a", domain.Standard)
	if _, err := h.convert(std.Name, domain.Preemptible); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "no standard node") {
		t.Fatalf("converting the last standard node: %v, want a conflict", err)
	}
}

// TestConvertRefusals: what may not convert is refused and changes
// nothing.
func TestConvertRefusals(t *testing.T) {
	h := convertFleet(t, 4)
	h.clk.Step(time.Second)
	std := h.onlyNode("a", domain.Standard)
	pre := h.nodes("a", domain.NodeReady)[1]
	cases := []struct {
		name, node string
		to         domain.ComputeClass
		want       error
	}{
		{"unknown node", "gpu-dp-99", domain.Standard, domain.ErrNotFound},
		{"already standard", std.Name, domain.Standard, domain.ErrConflict},
		{"already preemptible", pre.ID, domain.Preemptible, domain.ErrConflict},
	}
	for _, tc := range cases {
		if _, err := h.convert(tc.node, tc.to); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := h.convert(pre.ID, "spot"); err == nil {
		t.Error("an unknown class was taken")
	}
	// A draining node does not convert.
	one := 8
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &one}); err != nil {
		t.Fatal(err)
	}
	draining := h.nodes("a", domain.NodeDraining)
	if len(draining) != 1 {
		t.Fatalf("%d draining", len(draining))
	}
	if _, err := h.convert(draining[0].ID, domain.Standard); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "draining") {
		t.Errorf("converting a draining node: %v", err)
	}
	// Nothing changed: the counts are the tenant's and no event was added.
	cl, _ := h.st.GetCluster(h.ctx, "a")
	if cl.NumGPUs != 8 || cl.DesiredPreemptibleGPUs != 8 {
		t.Errorf("counts %d, %d after refusals", cl.NumGPUs, cl.DesiredPreemptibleGPUs)
	}
	for _, e := range h.events("a") {
		if e.Reason == domain.ReasonNodeConverted {
			t.Errorf("a refused conversion left an event: %+v", e)
		}
	}
}

// TestConvertOnlyOntoMachinesThatServeStandard: a preemptible node lent
// from another project's reservation cannot become an on-demand
// cluster's standard node.
func TestConvertOnlyOntoMachinesThatServeStandard(t *testing.T) {
	h := newHarness(t, quickPods, 1)
	h.update(func(tx store.Tx) error {
		if err := tx.CreateReservation(h.ctx, domain.Reservation{ID: "r-q", ProjectID: "q", Region: region, GPUType: gpu, CreatedAt: t0}); err != nil {
			return err
		}
		return tx.CreateMachine(h.ctx, domain.Machine{ID: "m-res", Region: region, GPUType: gpu, GPUs: 8, ReservationID: "r-q", CreatedAt: t0})
	})
	h.create("a", 8, 8)
	h.reconcile()
	h.advance(30 * time.Second)
	lent := h.onlyNode("a", domain.Preemptible)
	if lent.MachineID != "m-res" || lent.State != domain.NodeReady {
		t.Fatalf("preemptible node %+v, want it ready on the reserved machine", lent)
	}
	if _, err := h.convert(lent.ID, domain.Standard); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "reservation") {
		t.Fatalf("converting a node on another project's reservation: %v, want a conflict naming the reservation", err)
	}
}

// TestConvertedNodeIsMarkedAgain: the cluster is told of a conversion
// from the store, by the sweep: a mark lost (a crash before it, the tenant
// changing the label) comes back.
func TestConvertedNodeIsMarkedAgain(t *testing.T) {
	h := convertFleet(t, 4)
	p := h.nodes("a", domain.NodeReady)[1]
	h.clk.Step(time.Second)
	if _, err := h.convert(p.ID, domain.Standard); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	// Someone puts the old class back on it.
	old := driver.Spec(p)
	if err := h.sim.SetClass(h.ctx, old); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.c.SweepSoon()
	h.reconcile()
	if v, _ := h.sim.Node("a", p.Name); v.Class != domain.Standard || v.Labels[domain.LabelComputeClass] != "standard" {
		t.Fatalf("after a sweep the cluster shows %s, labels %v; want standard", v.Class, v.Labels)
	}
}
