package slurm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
)

// TestANodeThatJoinsNudgesARequeuedJob: once a node of the cluster
// becomes usable, the oldest job sparecap requeued that may run is
// released again (one scontrol update, which starts slurmctld's pass);
// nothing is written when no node joined, when the node is another
// cluster's or still drained, for a job whose begin time is later (the
// tenant's), for another cluster's requeue or a job not requeued, and a
// join nudges once.
func TestANodeThatJoinsNudgesARequeuedJob(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ours, theirs := "sparecap,preemptible,"+ClusterFeature("c1"), "sparecap,preemptible,"+ClusterFeature("c2")
	node := func(name, features string, flags ...string) *nodeInfo {
		return &nodeInfo{Name: name, Features: features, State: "idle", Flags: flags}
	}
	requeued := func(id int64, on string, eligible time.Time) *jobInfo {
		return &jobInfo{ID: id, State: "PENDING", Restarts: 1, EligibleTime: eligible.Unix(),
			AdminComment: comment("", mark{Node: on, Run: 0, By: now, Requeued: true})}
	}
	gone := "gone-1" // the reclaimed node, removed since: its mark is kept
	jobs := []*jobInfo{
		requeued(12, gone, now.Add(-time.Minute)),
		requeued(9, gone, now.Add(-time.Minute)),            // the oldest
		requeued(3, gone, now.Add(time.Hour)),               // the tenant's later begin
		requeued(4, "theirs-1", now.Add(-time.Minute)),      // another cluster's
		{ID: 2, State: "PENDING", EligibleTime: now.Unix()}, // not sparecap's
	}
	for _, tc := range []struct {
		name       string
		prev, next map[string]*nodeInfo
		jobs       []*jobInfo
		want       string
	}{
		{"nothing joined", map[string]*nodeInfo{"a": node("a", ours)}, map[string]*nodeInfo{"a": node("a", ours)}, jobs, ""},
		{"ours joined", map[string]*nodeInfo{}, map[string]*nodeInfo{"a": node("a", ours)}, jobs, "update jobid=9 StartTime=now"},
		{"ours resumed", map[string]*nodeInfo{"a": node("a", ours, "DRAIN")}, map[string]*nodeInfo{"a": node("a", ours)}, jobs, "update jobid=9 StartTime=now"},
		{"ours adopted", map[string]*nodeInfo{"a": node("a", "sparecap,preemptible")}, map[string]*nodeInfo{"a": node("a", ours)}, jobs, "update jobid=9 StartTime=now"},
		{"ours joined drained", map[string]*nodeInfo{}, map[string]*nodeInfo{"a": node("a", ours, "DRAIN")}, jobs, ""},
		{"theirs joined", map[string]*nodeInfo{}, map[string]*nodeInfo{"b": node("b", theirs)}, jobs, ""},
		{"no job may run", map[string]*nodeInfo{}, map[string]*nodeInfo{"a": node("a", ours)}, jobs[2:], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, wrote := nudgeCluster(t, now)
			tc.next["theirs-1"] = node("theirs-1", theirs)
			prev := &snapshot{nodes: tc.prev}
			next := &snapshot{nodes: tc.next, jobs: tc.jobs}
			c.noteJoined(prev, next)
			c.nudge(context.Background(), next)
			if got := wrote(); got != tc.want {
				t.Errorf("scontrol %q, want %q", got, tc.want)
			}
			c.nudge(context.Background(), next)
			if got := wrote(); got != tc.want {
				t.Errorf("after a second pass with no join: scontrol %q, want %q", got, tc.want)
			}
		})
	}
}

// nudgeCluster is a cluster c1 whose scontrol is a stand-in that records
// its arguments, read back by wrote.
func nudgeCluster(t *testing.T, now time.Time) (*Cluster, func() string) {
	log := filepath.Join(t.TempDir(), "scontrol.log")
	c := &Cluster{id: "c1", run: standInRunner(t, "scontrol", fmt.Sprintf("echo \"$*\" >> %s", log)),
		opts: Options{Clock: clock.NewFake(now), Log: slog.New(slog.DiscardHandler)}}
	return c, func() string {
		b, _ := os.ReadFile(log)
		return strings.TrimSpace(string(b))
	}
}

// standInRunner runs, for the Slurm command name, a shell script of body
// instead, with a minute's timeout.
func standInRunner(t *testing.T, name, body string) *runner {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &runner{timeout: time.Minute, slots: make(chan struct{}, 1), bin: dir, sleepFor: time.After}
}
