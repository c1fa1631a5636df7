package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDSNEnv names the environment variable that overrides DefaultTestDSN.
const TestDSNEnv = "SPARECAP_TEST_POSTGRES"

// DefaultTestDSN is the database tests use unless TestDSNEnv is set.
const DefaultTestDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// TestDSN creates a fresh, empty schema in the test database and returns a
// DSN whose search_path is that schema; the schema is dropped when the test
// ends (after the test's own cleanups, so close stores in t.Cleanup or
// before returning). Pass the DSN to Open, once or several times.
//
// The test fails, rather than skips, when PostgreSQL is unreachable: the
// PostgreSQL tests are the ones that prove the production backend works.
func TestDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(TestDSNEnv)
	if base == "" {
		base = DefaultTestDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres test database %q: %v (set %s)", redact(base), err, TestDSNEnv)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("postgres test database %q is unreachable: %v\n"+
			"start it (pg_ctlcluster <version> main start) or point %s at one",
			redact(base), err, TestDSNEnv)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "sparecap_t_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("postgres test database %q: create schema: %v", redact(base), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("pgx", base)
		if err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("postgres test database %q: %v", redact(base), err)
	}
	return dsn
}

// withSearchPath sets search_path in a URL or keyword/value DSN.
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse DSN: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

// redact drops a password from a URL DSN for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}
