package postgres

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

// TestLivePlans: the partial indexes of migrations 00007 and 00012 serve the
// live-state reads (the planner proves the query implies each index's
// predicate). Sequential scans are disabled for the check: on the empty
// test tables the planner would rightly prefer them.
func TestLivePlans(t *testing.T) {
	dsn := TestDSN(t)
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"snapshot nodes":          "nodes_live",
		"meter work list":         "nodes_unmetered",
		"meter stopped work list": "nodes_unmetered_stopped",
		"open usage":              "usage_open",
		"archive candidates":      "nodes_removed",
		"bulk node update":        "nodes_pkey",
		"due deliveries":          "webhook_deliveries_pending",
	}
	d := sqlstore.Dialect{Name: "postgres", NumberedPlaceholders: true, Lateral: true, BulkUpdate: true}
	for name, q := range sqlstore.LiveQueries(d) {
		rows, err := conn.QueryContext(t.Context(), "EXPLAIN "+q.Query, q.Args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", name, p)
		if !strings.Contains(p, want[name]) {
			t.Errorf("%s does not use %s:\n%s", name, want[name], p)
		}
		// The large tables; the due read goes through every endpoint, by design.
		for _, table := range []string{"nodes", "usage", "webhook_deliveries"} {
			if strings.Contains(p, "Seq Scan on "+table+" ") {
				t.Errorf("%s scans %s:\n%s", name, table, p)
			}
		}
	}
}
