package worklog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/store"
)

// TestTheWorstTenantStaysWithinItsQuota: a day of pods churning every 30
// seconds with as many and as long labels as a span keeps, on every node
// a tenant holds, leaves its storage within its quota (the spans past it
// are not recorded, and the operator is told once), while another
// tenant's work is recorded whole.
func TestTheWorstTenantStaysWithinItsQuota(t *testing.T) {
	st, f, clk := setup(t)
	ctx := t.Context()
	f.snap.Clusters = []domain.Cluster{{ID: "c1", ProjectID: "p1"}, {ID: "c2", ProjectID: "p2"}}
	f.snap.Nodes = nil
	for i := range 10 {
		f.snap.Nodes = append(f.snap.Nodes, &domain.Node{ID: fmt.Sprint("n", i), ClusterID: "c1", Name: fmt.Sprint("node-", i), GPUs: 8, ReadyAt: t0})
	}
	f.snap.Nodes = append(f.snap.Nodes, &domain.Node{ID: "h", ClusterID: "c2", Name: "honest", GPUs: 8, ReadyAt: t0})
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []string{"p1", "p2"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 2 << 20
	reached := map[string]int{}
	k := &quota.Keeper{Store: st, Default: limit, Reached: func(_ context.Context, p string, _, _ int64) { reached[p]++ }}
	r := New(st, f, f, clk, nil)
	r.Admit, r.Refused = k.Admit, k.Tell
	labels := map[string]string{}
	for i := range domain.MaxWorkLabels {
		labels[fmt.Sprintf("example.com/l%02d", i)] = strings.Repeat("v", 600)
	}
	start := clk.Now()
	for i := range 24 * 120 { // a day of 30-second passes
		now := start.Add(time.Duration(i) * 30 * time.Second)
		clk.Set(now)
		if i%20 == 0 {
			if err := k.Count(ctx, now); err != nil {
				t.Fatal(err)
			}
		}
		for n := range 10 {
			f.running[fmt.Sprint("node-", n)] = []domain.Running{{Key: fmt.Sprint("pod-", i), Namespace: "spam", Name: fmt.Sprint("pod-", i),
				GPUs: 8, Start: now, Labels: labels}}
		}
		f.running["honest"] = []domain.Running{{Key: fmt.Sprint("job-", i/120), Namespace: "ml", GPUs: 8, Start: start.Add(time.Duration(i/120) * time.Hour)}}
		pass(t, r)
	}
	if err := k.Count(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	for _, u := range k.Uses() {
		if u.Used > u.Quota {
			t.Errorf("project %s keeps %d bytes, over its quota of %d", u.ProjectID, u.Used, u.Quota)
		}
	}
	honest := 0
	for _, w := range spans(t, st) {
		if w.ProjectID == "p2" {
			honest++
		}
	}
	if honest != 24 {
		t.Errorf("the other tenant's work: %d spans recorded, want 24", honest)
	}
	if reached["p1"] != 1 || reached["p2"] != 0 {
		t.Errorf("told of projects at their quota %v, want p1 once", reached)
	}
}
