package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// rollFixture is November 2026 of 24 nodes in 6 clusters of 3 projects:
// two usage records a node (a price change on the 11th, a reclaim on
// the 16th), and pods in two namespaces with team and app labels,
// reporting progress, some still running into December.
func rollFixture(t *testing.T) (*Server, store.Store, time.Time) {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []domain.Price{
			{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.49"},
			{ID: "od2", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.29", EffectiveFrom: nov.AddDate(0, 0, 10)},
			{ID: "disc", Kind: domain.PricePreemptibleDiscount, Value: "50"},
		} {
			if err := tx.CreatePrice(ctx, p); err != nil {
				return err
			}
		}
		for i := range 3 {
			if err := tx.CreateProject(ctx, domain.Project{ID: fmt.Sprintf("p-%d", i), CreatedAt: nov}); err != nil {
				return err
			}
		}
		for c := range 6 {
			cl := domain.Cluster{ID: fmt.Sprintf("c-%d", c), Name: fmt.Sprintf("train-%d", c), ProjectID: fmt.Sprintf("p-%d", c%3),
				Region: "us-east", GPUType: "H100", CreatedAt: nov}
			if err := tx.CreateCluster(ctx, cl); err != nil {
				return err
			}
		}
		us, ws := rollFixtureRows(nov)
		if err := tx.PutUsages(ctx, us); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, ws)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BootstrapOperator(ctx, st, adminToken, nov); err != nil {
		t.Fatal(err)
	}
	now := nov.AddDate(0, 2, 0)
	return New(st, nil, clock.NewFake(now), clock.Real{}, nil), st, now
}

func rollFixtureRows(nov time.Time) ([]domain.UsageRecord, []domain.WorkSpan) {
	const day = 24 * time.Hour
	var us []domain.UsageRecord
	var ws []domain.WorkSpan
	for i := range 24 {
		c := i % 6
		node, cluster, project := fmt.Sprintf("n-%02d", i), fmt.Sprintf("c-%d", c), fmt.Sprintf("p-%d", c%3)
		cut := nov.Add(15*day + time.Duration(i*97)*time.Second)
		for j, r := range [][2]time.Time{{nov.Add(-3 * day), cut}, {cut, nov.Add(30*day + time.Duration(i)*time.Hour)}} {
			class := domain.Standard
			if (i+j)%2 == 1 {
				class = domain.Preemptible
			}
			us = append(us, domain.UsageRecord{NodeID: node, NodeName: node, ClusterID: cluster, ClusterName: fmt.Sprintf("train-%d", c),
				ProjectID: project, Region: "us-east", GPUType: "H100", Class: class, BillingType: domain.BillingOnDemand, GPUs: 8,
				Start: r[0], End: r[1], Final: true})
		}
		for d := range 31 {
			s := nov.Add(time.Duration(d)*day + time.Duration(i)*time.Minute)
			key := fmt.Sprintf("%s-%d", node, d)
			ns := []string{"ml", "eval"}[(i+d)%2]
			ws = append(ws, domain.WorkSpan{ProjectID: project, ClusterID: cluster, NodeID: node, End: s.Add(20 * time.Hour),
				Running: domain.Running{Key: key, Namespace: ns, Name: key, Job: "job/" + key, Account: ns + "-acct", GPUs: 4 + 4*(d%2),
					Start: s, Progress: int64(d * i), Labels: map[string]string{"team": fmt.Sprintf("team-%d", (i+d)%5), "app": "trainer"}}})
		}
	}
	return us, ws
}

// rollQueries are the questions the rollups answer, over November, and
// over a period whose edges are raw.
func rollQueries() []string {
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var out []string
	for _, period := range [][2]time.Time{{nov, nov.AddDate(0, 1, 0)}, {nov.AddDate(0, 0, -10), nov.AddDate(0, 1, 3)}} {
		for _, g := range []string{"cluster", "compute_class", "label:team", "label:app", "label:none", "namespace", "account"} {
			for _, scope := range [][]string{nil, {"project_id", "p-1"}, {"cluster_id", "c-4"}} {
				out = append(out, "/v1/usage"+q(period[0], period[1], append([]string{"group_by", g}, scope...)...))
			}
		}
	}
	return append(out, "/v1/invoices?month=2026-11&project_id=p-2", "/v1/invoices?month=2026-11&project_id=p-0&format=csv")
}

func getAll(t *testing.T, s *Server, paths []string) []string {
	t.Helper()
	out := make([]string, len(paths))
	for i, p := range paths {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", p, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		s.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
		out[i] = w.Body.String()
	}
	return out
}

// rollAll runs roller passes until nothing is left to roll.
func rollAll(t *testing.T, s *Server, now time.Time) {
	t.Helper()
	for range 10 {
		n, err := s.RollPass(context.Background(), now, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the roller did not settle")
}

// TestClosedMonthsReadFromRollups: once November is rolled, every
// answer about it (alone, or inside a period whose edges are raw) is the
// answer the raw rows gave, to the byte; a late row marks its cluster's
// month dirty (the raw rows answer, with it) until the month is rolled
// again; with the raw rows gone, the answers stay.
func TestClosedMonthsReadFromRollups(t *testing.T) {
	s, st, now := rollFixture(t)
	ctx := t.Context()
	paths := rollQueries()
	raw := getAll(t, s, paths)
	rollAll(t, s, now)
	state, err := st.RollupState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC); !state.RolledUntil.Equal(want) || len(state.Dirty) != 0 {
		t.Fatalf("rollup state %+v, want rolled until %v, nothing dirty", state, want)
	}
	rows := 0
	if err := st.ScanRollups(ctx, store.RollupFilter{}, func(domain.Rollup) error { rows++; return nil }); err != nil {
		t.Fatal(err)
	}
	if rows == 0 {
		t.Fatal("no rollup rows")
	}
	for _, p := range []string{"p-0", "p-1", "p-2"} {
		merged := 0
		if err := st.ScanRollups(ctx, store.RollupFilter{ProjectID: p, Merged: true}, func(domain.Rollup) error { merged++; return nil }); err != nil {
			t.Fatal(err)
		}
		if merged == 0 {
			t.Errorf("project %s has no merged rows", p)
		}
	}
	assertSame(t, paths, raw, getAll(t, s, paths), "rolled")

	// A late final record of a node of c-4 in November.
	late := domain.UsageRecord{NodeID: "n-late", NodeName: "n-late", ClusterID: "c-4", ClusterName: "train-4", ProjectID: "p-1",
		Region: "us-east", GPUType: "H100", Class: domain.Preemptible, BillingType: domain.BillingOnDemand, GPUs: 8,
		Start: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), Final: true}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutUsage(ctx, late) }); err != nil {
		t.Fatal(err)
	}
	if state, _ := st.RollupState(ctx); !slices.Contains(state.Dirty, domain.ClusterMonth{Month: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), ProjectID: "p-1", ClusterID: "c-4"}) {
		t.Fatalf("the late row marked %+v", state.Dirty)
	}
	withLate := getAll(t, s, paths)
	if slices.Equal(withLate, raw) {
		t.Fatal("the late row changed no answer")
	}
	rollAll(t, s, now)
	assertSame(t, paths, withLate, getAll(t, s, paths), "rolled again")

	// The raw rows of November go.
	err = st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.PruneUsage(ctx, now, 1000); err != nil {
			return err
		}
		_, err := tx.PruneWorkSpans(ctx, now, 100000)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := st.ScanWorkSpans(ctx, store.WorkSpanFilter{From: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}, func(domain.WorkSpan) error { left++; return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d spans of November left after pruning", left)
	}
	month := paths[:0:0]
	for i, p := range paths {
		if i < len(paths)/2-1 || p[:13] == "/v1/invoices?" {
			month = append(month, p)
		}
	}
	assertSame(t, month, getAll(t, s, month), getAll(t, s, month), "stable")
	var want []string
	for i, p := range paths {
		if slices.Contains(month, p) {
			want = append(want, withLate[i])
		}
	}
	s.UsageRetention, s.SpanRetention = 40*24*time.Hour, 35*24*time.Hour
	assertSame(t, month, want, getAll(t, s, month), "raw rows gone")
	// What the raw rows alone could answer is refused, not answered short.
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []string{
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0)),
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "day"),
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "job"),
		"/v1/usage" + q(nov.AddDate(0, 0, -10), nov.AddDate(0, 1, 0), "group_by", "cluster"),
		"/v1/usage" + q(nov, nov.AddDate(0, 0, 20), "group_by", "label:team"),
	} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", p, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		s.ServeHTTP(w, req)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "is no longer kept") {
			t.Errorf("%s: %d %s, want 400: no longer kept", p, w.Code, w.Body)
		}
	}
	// Once a cluster's work rows may be gone too (kept as long as usage
	// records), the work of one cluster or by namespace is refused; the
	// project's and the fleet's by label stay.
	s.UsageRetention = 20 * 24 * time.Hour
	for p, code := range map[string]int{
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "namespace"):                       400,
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "label:team", "cluster_id", "c-4"): 400,
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "label:team", "project_id", "p-1"): 200,
		"/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "cluster"):                         200,
	} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", p, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		s.ServeHTTP(w, req)
		if w.Code != code {
			t.Errorf("%s: %d %s, want %d", p, w.Code, w.Body, code)
		}
	}
}

func assertSame(t *testing.T, paths, want, got []string, when string) {
	t.Helper()
	for i := range paths {
		if got[i] != want[i] {
			t.Errorf("%s: %s:\n got %s\nwant %s", when, paths[i], got[i], want[i])
		}
	}
}

// TestRollupsKeepAThousandGroups: a cluster whose every pod has a label
// value of its own keeps at most domain.MaxRollupGroups groups in its
// month's rollup, the smallest merged as "(more groups)", and the
// month's totals stay exact.
func TestRollupsKeepAThousandGroups(t *testing.T) {
	s, st, now := rollFixture(t)
	ctx := t.Context()
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var ws []domain.WorkSpan
	for i := range domain.MaxRollupGroups + 200 {
		start := nov.Add(time.Duration(i) * 30 * time.Minute)
		ws = append(ws, domain.WorkSpan{ProjectID: "p-1", ClusterID: "c-4", NodeID: "n-own", End: start.Add(time.Duration(1+i%7) * time.Minute),
			Running: domain.Running{Key: fmt.Sprint("u-", i), GPUs: 1, Start: start, Labels: map[string]string{"team": fmt.Sprint("own-", i)}}})
	}
	own := domain.UsageRecord{NodeID: "n-own", NodeName: "n-own", ClusterID: "c-4", ClusterName: "train-4", ProjectID: "p-1",
		Region: "us-east", GPUType: "H100", Class: domain.Preemptible, BillingType: domain.BillingOnDemand, GPUs: 8,
		Start: nov, End: nov.AddDate(0, 1, 0), Final: true}
	err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutUsage(ctx, own); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, ws)
	})
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/usage" + q(nov, nov.AddDate(0, 1, 0), "group_by", "label:team", "project_id", "p-1")
	var raw, rolled apiv1.Usage
	decode := func(body string, out *apiv1.Usage) {
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatal(err)
		}
	}
	decode(getAll(t, s, []string{path})[0], &raw)
	rollAll(t, s, now)
	decode(getAll(t, s, []string{path})[0], &rolled)
	for _, scope := range []store.RollupFilter{{ClusterID: "c-4"}, {ProjectID: "p-1", Merged: true}} {
		work, more := 0, 0
		if err := st.ScanRollups(ctx, scope, func(r domain.Rollup) error {
			switch r.Kind {
			case domain.RollupWork:
				work++
			case domain.RollupMore:
				more++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if work+more > domain.MaxRollupGroups || more != 1 {
			t.Errorf("%+v: %d work rows and %d of more groups", scope, work, more)
		}
	}
	if !reflect.DeepEqual(rolled.Totals, raw.Totals) {
		t.Errorf("totals rolled %+v, raw %+v", rolled.Totals, raw.Totals)
	}
	found := false
	for _, l := range rolled.LineItems {
		found = found || l.Group == domain.MoreGroups
	}
	if !found || len(rolled.LineItems) > domain.MaxRollupGroups+2 || len(raw.LineItems) <= domain.MaxRollupGroups {
		t.Errorf("%d lines rolled (a more-groups line: %v), %d raw", len(rolled.LineItems), found, len(raw.LineItems))
	}
}

// TestAMonthWaitsForItsOpenRecords: a month is not rolled while an open
// record stops short of its end (the meter will cut it), unless that
// lasts RollWait.
func TestAMonthWaitsForItsOpenRecords(t *testing.T) {
	s, st, _ := rollFixture(t)
	ctx := t.Context()
	nov, dec := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	open := domain.UsageRecord{NodeID: "n-open", ClusterID: "c-0", ProjectID: "p-0", Region: "us-east", GPUType: "H100",
		Class: domain.Standard, GPUs: 8, Start: nov.AddDate(0, 0, 3), End: nov.AddDate(0, 0, 20)}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutUsage(ctx, open) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		now, until time.Time
	}{{dec.Add(2 * time.Hour), nov}, {dec.Add(RollWait - time.Hour), nov}, {dec.Add(RollWait + time.Hour), dec}} {
		if _, err := s.RollPass(ctx, c.now, 1000); err != nil {
			t.Fatal(err)
		}
		if st, _ := st.RollupState(ctx); !st.RolledUntil.Equal(c.until) {
			t.Errorf("at %v: rolled until %v, want %v", c.now, st.RolledUntil, c.until)
		}
	}
}

// failAfter is a store whose Updates fail once n have committed: a
// leader killed in the middle of rolling a month up.
type failAfter struct {
	store.Store
	n int
}

func (f *failAfter) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.n <= 0 {
		return fmt.Errorf("the leader is gone")
	}
	f.n--
	return f.Store.Update(ctx, fn)
}

// TestARollCutShortIsFinishedByTheNext: a roller stopped after a few of
// a month's transactions leaves the month marked, answered from the raw
// rows meanwhile (the same answers), and the next roller (a new leader)
// finishes it with the same rows the uninterrupted roll writes.
func TestARollCutShortIsFinishedByTheNext(t *testing.T) {
	s, st, now := rollFixture(t)
	paths := rollQueries()
	raw := getAll(t, s, paths)
	s.store = &failAfter{Store: st, n: 4}
	if _, err := s.RollPass(t.Context(), now, 1000); err == nil {
		t.Fatal("the cut-short roller reported no failure")
	}
	s.store = st
	if state, _ := st.RollupState(t.Context()); len(state.Dirty) == 0 {
		t.Fatal("nothing left to roll after the cut")
	}
	assertSame(t, paths, raw, getAll(t, s, paths), "cut short")
	rollAll(t, s, now)
	assertSame(t, paths, raw, getAll(t, s, paths), "finished")
}
