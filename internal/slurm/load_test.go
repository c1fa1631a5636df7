package slurm

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
)

// TestLoadFromThePoll: a node with no active job is idle; a job on
// several nodes is one gang; a node's work counts from its jobs' start,
// its priority is theirs. A poll older than a minute (slurmctld gone or
// slow), a node the poll does not know, or another cluster's question
// tell nothing: the plan falls back to its order by age.
func TestLoadFromThePoll(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	wide := &jobInfo{ID: 7, State: "RUNNING", StartTime: t0.Add(-time.Hour).Unix(), Priority: 4294901759, on: []string{"n1", "n2"}}
	solo := &jobInfo{ID: 8, State: "RUNNING", StartTime: t0.Add(-time.Minute).Unix(), Priority: 10, on: []string{"n3"}}
	done := &jobInfo{ID: 9, State: "COMPLETED", StartTime: t0.Add(-2 * time.Hour).Unix(), on: []string{"n4"}}
	c := &Cluster{id: "c", opts: Options{Clock: clk}}
	c.snap = &snapshot{at: t0, nodes: map[string]*nodeInfo{"n1": {}, "n2": {}, "n3": {}, "n4": {}},
		onNode: map[string][]*jobInfo{"n1": {wide}, "n2": {wide}, "n3": {solo}, "n4": {done}}}
	for node, want := range map[string]domain.NodeLoad{
		"n1": {Known: true, Gang: "slurm/7", LostGPUSeconds: 8 * 3600, WorkGPUSeconds: 8 * 3600, Priority: 4294901759},
		"n3": {Known: true, LostGPUSeconds: 8 * 60, WorkGPUSeconds: 8 * 60, Priority: 10},
		"n4": {Known: true, Idle: true},
		"n9": {},
	} {
		if got := c.Load("c", node); got != want {
			t.Errorf("%s: %+v, want %+v", node, got, want)
		}
	}
	if got := c.Load("other", "n1"); got != (domain.NodeLoad{}) {
		t.Errorf("another cluster's question: %+v", got)
	}
	clk.Set(t0.Add(2 * time.Minute))
	if got := c.Load("c", "n4"); got != (domain.NodeLoad{}) {
		t.Errorf("from a poll two minutes old: %+v, want unknown", got)
	}
}
