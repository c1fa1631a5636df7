package api

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// BenchmarkUsageStream serves GET /v1/usage over a month holding n usage
// records and reports the heap the request needed beyond what was live
// before it (peak-extra-MB), sampled while it runs and on every write.
func BenchmarkUsageStream(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s, from := usageFixture(b, n)
			to := from.AddDate(0, 1, 0)
			for _, mode := range []struct{ name, query string }{
				{"json", ""},
				{"csv", "&format=csv"},
				{"by-cluster", "&group_by=cluster"},
			} {
				b.Run(mode.name, func(b *testing.B) {
					path := "/v1/usage" + q(from, to, "project_id", "p") + mode.query
					var peak uint64
					var written int64
					for i := 0; i < b.N; i++ {
						p, n := serveMeasured(b, s, path)
						peak = max(peak, p)
						written = n
					}
					b.ReportMetric(float64(peak)/(1<<20), "peak-extra-MB")
					b.ReportMetric(float64(written)/(1<<20), "body-MB")
				})
			}
		})
	}
}

// peakWriter discards the body, counting it, and samples the heap every
// 256 KiB written.
type peakWriter struct {
	h       http.Header
	n, last int64
	sample  func()
}

func (w *peakWriter) Header() http.Header { return w.h }
func (w *peakWriter) WriteHeader(int)     {}
func (w *peakWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.n-w.last >= 256<<10 || len(p) >= 256<<10 {
		w.last = w.n
		w.sample()
	}
	return len(p), nil
}

// serveMeasured serves one request and returns the peak heap above the
// heap live before it, and the body's size.
func serveMeasured(b *testing.B, s *Server, path string) (uint64, int64) {
	b.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var mu sync.Mutex
	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapAlloc)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	w := &peakWriter{h: http.Header{}, sample: sample}
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	s.ServeHTTP(w, req)
	sample()
	close(stop)
	<-done
	if w.n == 0 {
		b.Fatal("empty response")
	}
	if peak < base {
		return 0, w.n
	}
	return peak - base, w.n
}

// usageFixture makes a store holding n final usage records of project p
// over the month from the returned time: 50 clusters, each record a node
// that ran a few hours, half of them preemptible, priced by one on-demand
// price and the discount. Some records are out of the book's reach (an
// unpriced region), reserved, still open or reach over the period's start,
// so that every kind of line appears. The rows go in with one prepared statement in
// one transaction.
func usageFixture(b testing.TB, n int) (*Server, time.Time) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: from}); err != nil {
			return err
		}
		for i, p := range []domain.Price{
			{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.49"},
			{ID: "od2", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.29", EffectiveFrom: from.AddDate(0, 0, 10)},
			{ID: "disc", Kind: domain.PricePreemptibleDiscount, Value: "50"},
			{ID: "res", Kind: domain.PriceReserved, Region: "us-east", GPUType: "H100", ReservationID: "r1", Value: "1.5"},
		} {
			p.CreatedAt = from.Add(time.Duration(i) * time.Second)
			if err := tx.CreatePrice(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO usage (node_id, node_name, cluster_id, cluster_name, project_id,
		region, gpu_type, class, billing_type, reservation_id, gpus, start_at, end_at, final)
		VALUES (?, ?, ?, ?, 'p', ?, 'H100', ?, ?, ?, 8, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	month := int64(30 * 24 * 3600)
	for i := 0; i < n; i++ {
		class := domain.Standard
		if i%2 == 1 {
			class = domain.Preemptible
		}
		start := from.Unix() + int64(i)*month/int64(n)
		if i < 3 {
			start -= 7200
		}
		end := start + 3600 + int64(i%7)*1800
		c := i % 50
		region, billingType, reservation := "us-east", domain.BillingOnDemand, ""
		switch i % 10 {
		case 3:
			region = "eu-unpriced"
		case 4:
			class, billingType, reservation = domain.Standard, domain.BillingReserved, "r1"
		}
		_, err := ins.ExecContext(ctx, fmt.Sprintf("n-%07d", i), fmt.Sprintf("gpu-%d", i),
			fmt.Sprintf("c-%02d", c), fmt.Sprintf("cluster-%02d", c), region, string(class),
			string(billingType), reservation, start*1_000_000, end*1_000_000, i%13 != 0)
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := BootstrapOperator(context.Background(), st, adminToken, time.Now()); err != nil {
		b.Fatal(err)
	}
	s := New(st, nil, clock.NewFake(from.AddDate(0, 2, 0)), clock.Real{}, nil)
	return s, from
}
