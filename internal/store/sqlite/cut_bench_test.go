package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// BenchmarkMeterCut writes the meter's cut of a 100,000-GPU fleet: the
// running usage records of 12,500 nodes in one transaction, as every
// metering pass does, with months rolled up before (so each write also
// checks whether it is a late row) and without.
func BenchmarkMeterCut(b *testing.B) {
	for _, rolled := range []bool{false, true} {
		b.Run(fmt.Sprintf("rolled=%v", rolled), func(b *testing.B) {
			ctx := b.Context()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
			if rolled {
				if err := st.Update(ctx, func(tx store.Tx) error { return tx.MarkRolled(ctx, start.AddDate(0, 3, 0)) }); err != nil {
					b.Fatal(err)
				}
			}
			us := make([]domain.UsageRecord, 12_500)
			for i := range us {
				id := fmt.Sprintf("n-%05d", i)
				us[i] = domain.UsageRecord{NodeID: id, NodeName: id, ClusterID: fmt.Sprintf("c-%04d", i%2000), ProjectID: "p",
					Class: domain.Preemptible, GPUs: 8, Start: start}
			}
			now := start.AddDate(0, 3, 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Minute)
				for j := range us {
					us[j].End = now
				}
				if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutUsages(ctx, us) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
