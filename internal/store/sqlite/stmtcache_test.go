package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	sqlite "modernc.org/sqlite"
)

// openCaching opens a one-connection pool of caching connections on a
// table t holding v = 1..5, and returns a function reading the
// connection's cache.
func openCaching(t *testing.T) (*sql.DB, func() *cachingConn) {
	t.Helper()
	db := sql.OpenDB(connector{dsn: filepath.Join(t.TempDir(), "c.db"), drv: &sqlite.Driver{}})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 5; v++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, v); err != nil {
			t.Fatal(err)
		}
	}
	return db, func() *cachingConn {
		var cc *cachingConn
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Raw(func(dc any) error { cc = dc.(*cachingConn); return nil }); err != nil {
			t.Fatal(err)
		}
		return cc
	}
}

func sum(t *testing.T, rows *sql.Rows) int {
	t.Helper()
	total := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		total += v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestStatementsArePreparedOnce: a query run again on the same connection
// reuses its statement, in and out of transactions, with the right
// answers each time.
func TestStatementsArePreparedOnce(t *testing.T) {
	db, cache := openCaching(t)
	ctx := t.Context()
	before := cache().prepares
	for i := range 50 {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE v > ?`, i%5).Scan(&n); err != nil || n != 5-i%5 {
			t.Fatalf("count of v > %d: %d, %v", i%5, n, err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE t SET v = v WHERE v = ?`, i%5); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := cache().prepares - before; got != 2 {
		t.Fatalf("two query texts run 50 times each were prepared %d times, want 2", got)
	}
}

// TestSameStatementWhileItsRowsAreOpen: running a query again while rows
// of the same text are being read gives each its own statement; neither
// answer is cut short.
func TestSameStatementWhileItsRowsAreOpen(t *testing.T) {
	db, _ := openCaching(t)
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const q = `SELECT v FROM t ORDER BY v`
	outer, err := conn.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close() // before the connection's, which waits for it
	total := 0
	for outer.Next() {
		var v int
		if err := outer.Scan(&v); err != nil {
			t.Fatal(err)
		}
		total += v
		if total > 15 {
			t.Fatal("the outer read started over: the inner one reset its statement")
		}
		inner, err := conn.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer inner.Close()
		if got := sum(t, inner); got != 15 {
			t.Fatalf("inner read while the outer is at %d: sum %d, want 15", v, got)
		}
		inner.Close()
	}
	outer.Close()
	if total != 15 {
		t.Fatalf("outer read: sum %d, want 15", total)
	}
	// Once closed, the cached statement serves again.
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if got := sum(t, rows); got != 15 {
		t.Fatalf("after both closed: sum %d", got)
	}
}

// TestCacheIsBounded: past maxCachedStmts texts the least recently used
// statement is finalized; every query still answers right.
func TestCacheIsBounded(t *testing.T) {
	db, cache := openCaching(t)
	ctx := t.Context()
	for i := range maxCachedStmts + 50 {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM t WHERE v <= %d`, i%7)
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n != min(i%7, 5) {
			t.Fatalf("%s: %d, %v", q, n, err)
		}
		q = fmt.Sprintf(`SELECT %d + count(*) FROM t`, i)
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n != i+5 {
			t.Fatalf("%s: %d, %v", q, n, err)
		}
	}
	c := cache()
	if len(c.stmts) > maxCachedStmts {
		t.Fatalf("%d statements cached, bound %d", len(c.stmts), maxCachedStmts)
	}
	// The seven texts used all along were kept.
	if _, ok := c.stmts[`SELECT count(*) FROM t WHERE v <= 3`]; !ok {
		t.Fatal("a text in constant use was evicted")
	}
}

// TestScriptsAndErrors: a script of several statements runs whole and is
// not cached; a bad query fails as it would uncached and caches nothing.
func TestScriptsAndErrors(t *testing.T) {
	db, cache := openCaching(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (10); INSERT INTO t (v) VALUES (20)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT sum(v) FROM t`).Scan(&n); err != nil || n != 45 {
		t.Fatalf("after the script: sum %d, %v", n, err)
	}
	_, err := db.ExecContext(ctx, `SELEKT 1`)
	if err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("bad query: %v", err)
	}
	for q := range cache().stmts {
		if strings.Contains(q, ";") || strings.Contains(q, "SELEKT") {
			t.Fatalf("cached %q", q)
		}
	}
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}
