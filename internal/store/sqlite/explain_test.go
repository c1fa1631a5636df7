package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

// TestLivePlans: the live-state reads use the partial indexes of
// migrations 00007 and 00012 and never scan the nodes, usage or deliveries tables.
func TestLivePlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string]string{
		"snapshot nodes":          "nodes_live",
		"meter work list":         "nodes_unmetered",
		"meter stopped work list": "nodes_unmetered_stopped",
		"open usage":              "usage_open",
		"archive candidates":      "nodes_removed",
		"bulk node update":        "sqlite_autoindex_nodes_1",
		"due deliveries":          "webhook_deliveries_pending",
	}
	for name, q := range sqlstore.LiveQueries(dialect) {
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.Query, q.Args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		t.Logf("%s: %s", name, p)
		if !strings.Contains(p, "INDEX "+want[name]) {
			t.Errorf("%s does not use %s: %s", name, want[name], p)
		}
		for _, d := range plan {
			if d == "SCAN nodes" || d == "SCAN usage" || strings.HasPrefix(d, "SCAN webhook_deliveries") || d == "SCAN d" {
				t.Errorf("%s scans a table: %s", name, p)
			}
		}
	}
}
