package slurm

import (
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
)

// TestChangedWakesWhatStepsWaitFor: between two polls, a node is woken
// when something its step waits for changed, and not otherwise: AddNode
// waits for a node to register (with the cluster's feature or without,
// to be adopted), respond, be adopted and not be drained; a drain for the
// last job to end; a lost node for it to stop responding or go.
func TestChangedWakesWhatStepsWaitFor(t *testing.T) {
	c := &Cluster{id: "c1"}
	var woken []string
	c.SetHooks(driver.Hooks{Wake: func(cluster, node string, _ time.Time) {
		if cluster != "c1" {
			t.Errorf("woke %s of cluster %s", node, cluster)
		}
		woken = append(woken, node)
	}})
	ours, bare, theirs := "sparecap,preemptible,"+ClusterFeature("c1"), "sparecap,preemptible", "sparecap,preemptible,"+ClusterFeature("c2")
	node := func(name, features, state string, flags ...string) *nodeInfo {
		return &nodeInfo{Name: name, Features: features, State: state, Flags: flags}
	}
	job := &jobInfo{ID: 7, State: "RUNNING"}
	prev := &snapshot{nodes: map[string]*nodeInfo{}, onNode: map[string][]*jobInfo{"ended": {job}, "busy": {job}}}
	next := &snapshot{nodes: map[string]*nodeInfo{}, onNode: map[string][]*jobInfo{"busy": {job}}}
	var want []string
	for _, tc := range []struct {
		name       string
		prev, next *nodeInfo
		wake       bool
	}{
		{"registered", nil, node("registered", ours, "idle"), true},
		{"registered-bare", nil, node("registered-bare", bare, "idle"), true},
		{"registered-theirs", nil, node("registered-theirs", theirs, "idle"), false},
		{"responding", node("responding", bare, "unknown"), node("responding", bare, "idle"), true},
		{"adopted", node("adopted", bare, "idle"), node("adopted", ours, "idle"), true},
		{"resumed", node("resumed", ours, "idle", "DRAIN"), node("resumed", ours, "idle"), true},
		{"drained", node("drained", ours, "idle"), node("drained", ours, "idle", "DRAIN"), true},
		{"ended", node("ended", ours, "idle", "DRAIN"), node("ended", ours, "idle", "DRAIN"), true},
		{"busy", node("busy", ours, "mixed", "DRAIN"), node("busy", ours, "mixed", "DRAIN"), false},
		{"lost", node("lost", ours, "idle"), node("lost", ours, "down"), true},
		{"gone", node("gone", ours, "idle"), nil, true},
		{"unchanged", node("unchanged", ours, "idle"), node("unchanged", ours, "idle"), false},
		{"bare-unchanged", node("bare-unchanged", bare, "idle"), node("bare-unchanged", bare, "idle"), false},
		{"bare-drained", node("bare-drained", bare, "idle"), node("bare-drained", bare, "idle", "DRAIN"), false},
		{"theirs-gone", node("theirs-gone", theirs, "idle"), nil, false},
	} {
		if tc.prev != nil {
			prev.nodes[tc.name] = tc.prev
		}
		if tc.next != nil {
			next.nodes[tc.name] = tc.next
		}
		if tc.wake {
			want = append(want, tc.name)
		}
	}
	c.changed(prev, next)
	slices.Sort(want)
	slices.Sort(woken)
	if !slices.Equal(woken, want) {
		t.Errorf("woke %v, want %v", woken, want)
	}
}
