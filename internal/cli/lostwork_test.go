package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestStatsLostWork: the ledger's lines and totals, next to the savings;
// the grouping and the month are sent as asked.
func TestStatsLostWork(t *testing.T) {
	noticed := t0.Add(-time.Hour)
	lw := apiv1.LostWork{From: t0.Add(-24 * time.Hour), To: t0, GroupBy: "reclaim",
		Lines: []apiv1.LostWorkLine{{Key: "n-1", ClusterName: "train", NodeName: "gpu-preemptible-dp-2", Job: "jobset/ml/train", Cause: "preempted",
			NoticedAt: &noticed, Drains: 1, LostGPUSeconds: 7200, LostGPUHours: 2, LostAmount: "0.890000", DestroyedGPUHours: 1.5}},
		Totals: apiv1.LostWorkTotals{Drains: 1, LostGPUSeconds: 7200, LostGPUHours: 2, LostAmount: "0.89", DestroyedGPUHours: 1.5, PreemptibleSavings: "12.34"}}
	f := newFakeAPI(t)
	f.handle("GET /v1/stats/lost-work", 200, lw)
	r := f.run("stats", "lost-work", "--month", "2025-02", "--group-by", "job")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "lost-work output", r.stdout, "jobset/ml/train", "preempted", "0.890000",
		"1.50", "Total: 1 drains, 2.00 GPU-hours at risk worth $0.89, 1.50 destroyed (the rest checkpointed within the notice); preemptible capacity saved $12.34")
	q := f.only("GET", "/v1/stats/lost-work")[0].Query
	if !strings.Contains(q, "group_by=job") || !strings.Contains(q, "from=2025-02-01T00%3A00%3A00Z") || !strings.Contains(q, "to=2025-03-01T00%3A00%3A00Z") {
		t.Fatalf("query %q", q)
	}
	if r := f.run("stats", "lost-work", "--month", "2025-02", "--from", "2025-02-01T00:00:00Z"); r.err == nil {
		t.Error("--month with --from was taken")
	}
}
