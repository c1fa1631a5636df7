package api

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/retention"
	"github.com/sparecap/sparecap/internal/store"
)

var yearGPUs = flag.Int("year.gpus", 100_000, "the fleet of BenchmarkYear, in GPUs")

// BenchmarkYear writes a year of a fleet's records month by month
// through the real store, SQLite and PostgreSQL (the label benchmark's
// month: 8-GPU nodes in 2,000 clusters of 50 projects, two usage records
// a node and two labelled pods a node a day), and after each month does
// what the leader does: rolls the closed month up and runs the
// retention with its defaults (PostgreSQL then vacuums, as autovacuum
// would). It reports every table's bytes at months 1, 3, 6 and 12 in its
// log, the live bytes of month 12 over month 3 as m12/m3, and checks that
// March can still be asked by label at the year's end (and not by node).
func BenchmarkYear(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(fmt.Sprintf("%s/gpus=%d", backend, *yearGPUs), func(b *testing.B) {
			for range b.N {
				runYear(b, backend, *yearGPUs/8)
			}
		})
	}
}

func runYear(b *testing.B, backend string, nodes int) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, st, dsn := openFixture(b, backend, start, 2000)
	clk := clock.NewFake(start)
	s.clock = clk
	s.UsageRetention, s.SpanRetention = domain.DefaultUsageRetention, domain.DefaultSpanRetention
	p := &retention.Pruner{Store: st, Clock: clk, Slice: 5000, Slices: 10000,
		Rules: []retention.Rule{retention.Usage(domain.DefaultUsageRetention), retention.WorkSpans(domain.DefaultSpanRetention),
			retention.ClusterWork(domain.DefaultUsageRetention), retention.LabelSets()}}
	live := map[int]int64{}
	for m := 1; m <= 12; m++ {
		month := start.AddDate(0, m-1, 0)
		writeMonth(b, st, month, nodes, 2000)
		now := month.AddDate(0, 1, 0).Add(2 * time.Hour)
		clk.Set(now)
		for {
			n, err := s.RollPass(ctx, now, 100_000)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if _, err := p.Pass(ctx); err != nil {
			b.Fatal(err)
		}
		if dsn != "" {
			vacuum(b, dsn)
		}
		if m == 1 || m == 3 || m == 6 || m == 12 {
			live[m] = logSizes(b, st, m)
		}
	}
	b.ReportMetric(float64(live[12])/float64(live[3]), "m12/m3")
	b.ReportMetric(float64(live[12])/(1<<20), "MB@12")
	askMarch(b, s)
}

// vacuum vacuums the store's tables as autovacuum would (their space is
// reused, not given back).
func vacuum(b *testing.B, dsn string) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`VACUUM ANALYZE work_spans, usage, rollups, label_sets, rollup_dirty`); err != nil {
		b.Fatal(err)
	}
}

// logSizes logs every table's rows and bytes at month m and returns the
// sum of their bytes.
func logSizes(b *testing.B, st store.Store, m int) int64 {
	sizes, err := st.(store.Sizer).TableSizes(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i].Bytes > sizes[j].Bytes })
	var total int64
	var line strings.Builder
	for _, t := range sizes {
		total += t.Bytes
		if t.Bytes >= 1<<20 {
			fmt.Fprintf(&line, " %s %d rows %.1f MB;", t.Table, t.Rows, float64(t.Bytes)/(1<<20))
		}
	}
	b.Logf("month %2d: %.1f MB live:%s", m, float64(total)/(1<<20), line.String())
	return total
}

// askMarch asks March by label (answered from its rollups) and by node
// (refused: its raw records are gone).
func askMarch(b *testing.B, s *Server) {
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		group string
		code  int
	}{{"label:team", 200}, {"node", 400}} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/usage"+q(march, march.AddDate(0, 1, 0), "group_by", c.group), nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		start := time.Now()
		s.ServeHTTP(w, req)
		if w.Code != c.code {
			b.Fatalf("March by %s: %d %s", c.group, w.Code, w.Body)
		}
		b.Logf("March by %s at the year's end: %d in %s", c.group, w.Code, time.Since(start).Round(time.Millisecond))
	}
}
