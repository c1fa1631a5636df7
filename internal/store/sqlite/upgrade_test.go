package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/store/storetest"
)

// TestTokensUpgrade: a database from before token lifecycles keeps its
// project tokens working: each gets an ID and a name, no expiry.
func TestTokensUpgrade(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := openPool(ctx, path, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, db, 7); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.ExecContext(ctx, `INSERT INTO projects (id, created_at) VALUES ('p', ?)`, at.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO tokens (hash, project_id, created_at) VALUES ('0123456789abcdef0123', 'p', ?)`, at.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckUpgradedToken(t, s, at)
}

// TestUsageUpgrade: usage written before node class periods (one record
// per node) is kept and keeps being metered.
func TestUsageUpgrade(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := openPool(ctx, path, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, db, 13); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.ExecContext(ctx, `INSERT INTO usage (node_id, start_at, end_at) VALUES ('n', ?, ?)`, at.UnixMicro(), at.Add(time.Hour).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckUpgradedUsage(t, s, at)
}
