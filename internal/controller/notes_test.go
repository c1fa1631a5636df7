package controller

import (
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// TestRecordNote: a driver's note is an event of its node; one for a
// cluster that is gone is dropped.
func TestRecordNote(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	h.c.RecordNote(driver.NodeNote{ClusterID: "a", NodeName: pre.Name, Reason: domain.ReasonDrainReasonKept, Message: "kept the tenant's reason"})
	h.c.RecordNote(driver.NodeNote{ClusterID: "nope", NodeName: "x", Reason: domain.ReasonDrainReasonKept, Message: "gone"})
	h.reconcile()
	var got []domain.Event
	for _, e := range h.events("a") {
		if e.Reason == domain.ReasonDrainReasonKept {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].NodeID != pre.ID || got[0].NodeName != pre.Name || got[0].Message != "kept the tenant's reason" {
		t.Fatalf("events %+v", got)
	}
	if h.c.notes.len() != 0 {
		t.Fatal("a note was kept after it was recorded or dropped")
	}
}
