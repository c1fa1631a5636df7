package budget

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// BenchmarkStatus works out a budget's month on day 20 for a project of
// nodes 8-GPU nodes running all month (a 100,000-GPU fleet of 50 projects
// has 250 each), whole-project and by label (each node running two pods
// a day).
func BenchmarkStatus(b *testing.B) {
	const nodes = 250
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := b.Context()
	var us []domain.UsageRecord
	var ws []domain.WorkSpan
	for i := range nodes {
		node := fmt.Sprint("n", i)
		us = append(us, domain.UsageRecord{NodeID: node, ClusterID: "c", ProjectID: "p", Class: domain.Preemptible, GPUType: "H100",
			GPUs: 8, Start: nov, End: nov.Add(20 * 24 * time.Hour)})
		for d := range 20 {
			for k := range 2 {
				s := nov.Add(time.Duration(d)*24*time.Hour + time.Duration(k)*time.Hour)
				ws = append(ws, domain.WorkSpan{ProjectID: "p", ClusterID: "c", NodeID: node, End: s.Add(22 * time.Hour),
					Running: domain.Running{Key: fmt.Sprint(node, d, k), GPUs: 4, Start: s, Labels: map[string]string{"team": fmt.Sprint("t", (i+d+k)%20)}}})
			}
		}
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutUsages(ctx, us); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, ws)
	})
	if err != nil {
		b.Fatal(err)
	}
	book, _ := billing.NewBook([]domain.Price{{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.99", EffectiveFrom: nov.AddDate(0, -1, 0)},
		{ID: "d", Kind: domain.PricePreemptibleDiscount, Value: "50", EffectiveFrom: nov.AddDate(0, -1, 0)}})
	now := nov.Add(20 * 24 * time.Hour)
	for _, label := range []string{"", "team=t3"} {
		b.Run(fmt.Sprintf("label=%q", label), func(b *testing.B) {
			for b.Loop() {
				if _, err := StatusAt(ctx, st, book, domain.Budget{ProjectID: "p", Label: label, Amount: "1000"}, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
