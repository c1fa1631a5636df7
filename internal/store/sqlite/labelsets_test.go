package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// TestLabelSetsNoRowNamesGo: a label set stored once for the rollups
// goes when the last row naming it does, and one still named stays.
func TestLabelSetsNoRowNamesGo(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	row := func(team string) domain.Rollup {
		return domain.Rollup{Kind: domain.RollupWork, Labels: map[string]string{"team": team}, Start: nov, End: nov, HasLine: true}
	}
	put := func(cluster string, rows ...domain.Rollup) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.PutRollups(ctx, domain.ClusterMonth{Month: nov, ProjectID: "p", ClusterID: cluster}, rows)
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("c1", row("a"), row("b"))
	put("c2", row("a"))
	put("c1") // b is named no more; a still is, by c2
	var n int
	if err := st.Update(ctx, func(tx store.Tx) (err error) { n, err = tx.PruneLabelSets(ctx, 10); return err }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("pruned %d label sets, want b's", n)
	}
	var got []domain.Rollup
	if err := st.ScanRollups(ctx, store.RollupFilter{}, func(r domain.Rollup) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels["team"] != "a" {
		t.Errorf("rows left %+v", got)
	}
}
