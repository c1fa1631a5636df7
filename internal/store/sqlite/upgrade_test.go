package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

// at is when the old rows were written; SQLite keeps times in
// microseconds.
var at = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// upgrade writes rows (statements with their arguments) into a database
// migrated to version, then opens it as the store does, migrating the rest.
func upgrade(t *testing.T, version int64, rows ...[]any) store.Store {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := openPool(ctx, path, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, db, version); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := db.ExecContext(ctx, r[0].(string), r[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTokensUpgrade: a database from before token lifecycles keeps its
// project tokens working: each gets an ID and a name, no expiry.
func TestTokensUpgrade(t *testing.T) {
	s := upgrade(t, 7,
		[]any{`INSERT INTO projects (id, created_at) VALUES ('p', ?)`, at.UnixMicro()},
		[]any{`INSERT INTO tokens (hash, project_id, created_at) VALUES ('0123456789abcdef0123', 'p', ?)`, at.UnixMicro()})
	storetest.CheckUpgradedToken(t, s, at)
}

// TestUsageUpgrade: usage written before node class periods (one record
// per node) is kept and keeps being metered.
func TestUsageUpgrade(t *testing.T) {
	s := upgrade(t, 13, []any{`INSERT INTO usage (node_id, start_at, end_at) VALUES ('n', ?, ?)`, at.UnixMicro(), at.Add(time.Hour).UnixMicro()})
	storetest.CheckUpgradedUsage(t, s, at)
}

// TestBudgetAlertsUpgrade: alerts raised once per budget ID (copies of
// one name's alert by re-created budgets) keep their first copy.
func TestBudgetAlertsUpgrade(t *testing.T) {
	row := func(seq int, budget, month string) []any {
		return []any{`INSERT INTO budget_alerts (seq, budget_id, project_id, name, kind, threshold, alert_key, month, at)
			VALUES (?, ?, 'p', 'all', 'spend', 50, 'spend:50', ?, ?)`, seq, budget, month, at.UnixMicro()}
	}
	s := upgrade(t, 19, row(1, "b1", "2026-11"), row(2, "b2", "2026-11"), row(3, "b1x", "2026-10"))
	storetest.CheckUpgradedAlerts(t, s, at)
}

// TestNodeTypesUpgrade: nodes from before nodes had a GPU type, live and
// archived, get their machines'.
func TestNodeTypesUpgrade(t *testing.T) {
	s := upgrade(t, 22,
		[]any{`INSERT INTO projects (id, created_at) VALUES ('p', ?)`, at.UnixMicro()},
		[]any{`INSERT INTO machines (id, region, gpu_type, gpus) VALUES ('m', 'r', 'H200', 8)`},
		[]any{`INSERT INTO clusters (id, name, project_id, region, gpu_type) VALUES ('c', 'c', 'p', 'r', 'H100')`},
		[]any{`INSERT INTO nodes (id, cluster_id, machine_id, name, state) VALUES ('n', 'c', 'm', 'n', 'ready')`},
		[]any{`INSERT INTO node_history (id, cluster_id, machine_id, name, state) VALUES ('h', 'c', 'm', 'h', 'removed')`})
	storetest.CheckUpgradedNodeTypes(t, s)
}
