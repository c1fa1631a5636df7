package api

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestLostWork: the ledger as a tenant reads it: its own entries only,
// grouped by job (a gang's drains together, a node's own work alone), by
// reclaim or by month, each valued at the preemptible price of its notice
// ($0.445 a GPU-hour here), totalled next to what preemptible capacity
// saved; work checkpointed within its notice is saved, not destroyed; bad
// input is refused.
func TestLostWork(t *testing.T) {
	e, c, start := usageWorld(t)
	at := start.Add(10 * time.Minute)
	entry := func(node, project, job string, secs int64) domain.LostWork {
		return domain.LostWork{NodeID: "n-" + node, NodeName: node, ClusterID: c.ClusterID, ClusterName: c.ClusterName, ProjectID: project,
			Region: "us-central-2", GPUType: "RTX_6000_PCI", Class: domain.Preemptible, Cause: domain.CausePreempted, At: at, GPUSeconds: secs, Job: job}
	}
	// One of the gang's members checkpointed within its notice.
	if err := e.st.Update(e.ctx, func(tx store.Tx) error {
		err := tx.AddLostWork(e.ctx, []domain.LostWork{
			entry("gpu-preemptible-dp-2", "p", "jobset/ml/train", 3600), entry("gpu-preemptible-dp-3", "p", "jobset/ml/train", 3600),
			entry("gpu-preemptible-dp-4", "p", "", 1800), entry("gpu-preemptible-dp-9", "q", "", 99999)})
		if err != nil {
			return err
		}
		return tx.SaveLostWork(e.ctx, "n-gpu-preemptible-dp-3", at.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	end := e.clk.Now()
	var byJob apiv1.LostWork
	e.do("p", "GET", "/v1/stats/lost-work"+q(start, end, "group_by", "job"), "", 200, &byJob)
	want := []apiv1.LostWorkLine{
		{Key: "jobset/ml/train", ClusterID: c.ClusterID, ClusterName: c.ClusterName, Job: "jobset/ml/train", Drains: 2, LostGPUSeconds: 7200, LostGPUHours: 2, LostAmount: "0.890000",
			SavedGPUSeconds: 3600, DestroyedGPUHours: 1},
		{Key: "node/gpu-preemptible-dp-4", ClusterID: c.ClusterID, ClusterName: c.ClusterName, Drains: 1, LostGPUSeconds: 1800, LostGPUHours: 0.5, LostAmount: "0.222500", DestroyedGPUHours: 0.5},
	}
	if len(byJob.Lines) != 2 || byJob.Lines[0] != want[0] || byJob.Lines[1] != want[1] {
		t.Fatalf("by job: %+v", byJob.Lines)
	}
	if tt := byJob.Totals; tt.Drains != 3 || tt.LostGPUSeconds != 9000 || tt.LostAmount != "1.11" || tt.SavedGPUSeconds != 3600 || tt.DestroyedGPUHours != 1.5 || tt.PreemptibleSavings == "" || tt.PreemptibleSavings == "0.00" {
		t.Fatalf("totals %+v", tt)
	}
	var byReclaim, byMonth apiv1.LostWork
	e.do("p", "GET", "/v1/stats/lost-work"+q(start, end), "", 200, &byReclaim)
	if byReclaim.GroupBy != "reclaim" || len(byReclaim.Lines) != 3 || byReclaim.Lines[0].NoticedAt == nil || !byReclaim.Lines[0].NoticedAt.Equal(at) || byReclaim.Lines[0].Cause != "preempted" {
		t.Fatalf("by reclaim: %+v", byReclaim.Lines)
	}
	e.do("p", "GET", "/v1/stats/lost-work"+q(start, end, "group_by", "month"), "", 200, &byMonth)
	if len(byMonth.Lines) != 1 || byMonth.Lines[0].Key != at.UTC().Format("2006-01") || byMonth.Lines[0].Drains != 3 {
		t.Fatalf("by month: %+v", byMonth.Lines)
	}
	var admin apiv1.LostWork
	e.do("admin", "GET", "/v1/stats/lost-work"+q(start, end), "", 200, &admin)
	if admin.Totals.Drains != 4 {
		t.Fatalf("the operator sees every project's: %+v", admin.Totals)
	}
	for _, tc := range []struct {
		who, query, field string
		status            int
	}{
		{"p", q(start, end, "group_by", "pod"), "group_by", 400},
		{"p", "", "from", 400},
		{"q", q(start, end, "cluster_id", c.ClusterID), "", 404},
	} {
		if got := e.apiErr(tc.who, "GET", "/v1/stats/lost-work"+tc.query, "", tc.status); got.Field != tc.field {
			t.Errorf("%s %s: %+v", tc.who, tc.query, got)
		}
	}
}
