package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

func missingPerm(p string) domain.MissingPermission {
	return domain.MissingPermission{Permission: p, Effect: "it costs: grant " + p}
}

// permissionEvents are the cluster's PermissionMissing events.
func (h *harness) permissionEvents(cluster string) []domain.Event {
	var out []domain.Event
	for _, e := range h.events(cluster) {
		if e.Reason == domain.ReasonPermissionMissing {
			out = append(out, e)
		}
	}
	return out
}

// TestRecordAccess: what drivers report of a cluster's permissions is
// recorded once per cluster: a refusal reported again (by a driver that
// restarted, or for another pod) changes nothing, a check replaces what
// was known, and an event is posted only when something is newly
// missing, on the node whose step met the refusal.
func TestRecordAccess(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	refused := driver.AccessReport{ClusterID: "a", NodeName: pre.Name, Missing: []domain.MissingPermission{missingPerm("create events")}}
	h.c.RecordAccess(refused)
	h.c.RecordAccess(refused)
	h.reconcile()
	evs := h.permissionEvents("a")
	if len(evs) != 1 || evs[0].NodeID != pre.ID || !strings.Contains(evs[0].Message, "node "+pre.Name) || !strings.Contains(evs[0].Message, "create events (courtesy): it costs") {
		t.Fatalf("events %+v", evs)
	}
	cl, _ := h.st.GetCluster(h.ctx, "a")
	if !cl.Access.CheckedAt.IsZero() || len(cl.Access.Missing) != 1 || !cl.Access.Missing[0].Since.Equal(h.clk.Now()) {
		t.Fatalf("access %+v", cl.Access)
	}
	since := h.clk.Now()

	// A check that finds it and one more: only the new one is news.
	h.clk.Step(time.Minute)
	h.c.RecordAccess(driver.AccessReport{ClusterID: "a", Checked: true, Missing: []domain.MissingPermission{missingPerm("create events"), missingPerm("patch pods")}})
	h.reconcile()
	if evs := h.permissionEvents("a"); len(evs) != 2 || evs[1].NodeID != "" || strings.Contains(evs[1].Message, "create events") || !strings.Contains(evs[1].Message, "patch pods") {
		t.Fatalf("events after the check %+v", evs)
	}
	cl, _ = h.st.GetCluster(h.ctx, "a")
	if !cl.Access.CheckedAt.Equal(h.clk.Now()) || len(cl.Access.Missing) != 2 || !cl.Access.Missing[0].Since.Equal(since) {
		t.Fatalf("access after the check %+v", cl.Access)
	}

	// Granted since: a check that finds nothing missing clears the record
	// and posts nothing.
	h.c.RecordAccess(driver.AccessReport{ClusterID: "a", Checked: true})
	h.reconcile()
	cl, _ = h.st.GetCluster(h.ctx, "a")
	if len(cl.Access.Missing) != 0 || cl.Access.CheckedAt.IsZero() || len(h.permissionEvents("a")) != 2 {
		t.Fatalf("after a clean check: %+v, %d events", cl.Access, len(h.permissionEvents("a")))
	}
	// A report for a cluster that is gone is dropped.
	h.c.RecordAccess(driver.AccessReport{ClusterID: "nope", Checked: true})
	h.reconcile()
}
