// Package postgres is the PostgreSQL backend of store.Store, for control
// planes that share one database (several replicas, or a managed database
// with backups).
//
// Update runs SERIALIZABLE: the allocator's guarantees (a machine serves at
// most one node, a node number is handed out once) rest on reads made
// inside the transaction, and row locks would not cover rows that a
// concurrent transaction inserts. Serialization failures are retried by
// re-running the Update function.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SQLSTATE codes the store branches on.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeForeignKeyViolation  = "23503"
	codeUniqueViolation      = "23505"
)

func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Open connects to the database at dsn (a pgx connection string; set
// search_path in it to use a schema other than public) and migrates that
// schema to the current version.
func Open(ctx context.Context, dsn string) (store.Store, error) {
	return OpenWith(ctx, dsn, sqlstore.Options{})
}

// OpenWith is Open with the store's options (its clock).
func OpenWith(ctx context.Context, dsn string, o sqlstore.Options) (store.Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// A server that dies or stops (SIGSTOP, a cut network) inside a
	// transaction must not hold its locks (the leader row among them)
	// for long: the database ends such a session after this long idle.
	if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = "5000"
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if schema == "" {
		db.Close()
		return nil, errors.New("open postgres: no current schema: search_path names no existing schema")
	}
	// Advisory locks are database-wide; keying them by schema keeps
	// sparecaps in different schemas of one database out of each other's way.
	key := lockKey(schema)
	if err := migrate(ctx, db, key); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres (schema %s): %w", schema, err)
	}
	d := sqlstore.Dialect{
		Name: "postgres",
		// The planner's row estimate (0 before the first ANALYZE) and the
		// table's bytes with its indexes and TOAST.
		TableSizes: `SELECT c.relname, GREATEST(c.reltuples, 0)::bigint, pg_total_relation_size(c.oid)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname != 'goose_db_version'
			ORDER BY c.relname`,
		NumberedPlaceholders: true,
		UpdateTx:             sql.TxOptions{Isolation: sql.LevelSerializable},
		// REPEATABLE READ is already one snapshot, and read-only
		// transactions there never fail to serialize.
		SnapshotTx: sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		Retryable: func(err error) bool {
			c := pgCode(err)
			return c == codeSerializationFailure || c == codeDeadlockDetected
		},
		ForeignKeyViolation: func(err error) bool { return pgCode(err) == codeForeignKeyViolation },
		UniqueViolation:     func(err error) bool { return pgCode(err) == codeUniqueViolation },
		NowMicros:           `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`,
		FenceLock:           ` FOR SHARE`,
		UpsertDefault:       true,
		BulkUpdate:          true,
		Lateral:             true,
		// Held until the transaction ends, so that a transaction drawing a
		// Seq commits before the next one can draw a larger one.
		EventLock: fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, key+1),
	}
	// Connections are kept for reuse, and no more are opened than kept:
	// opening one costs the database a process and every statement a new
	// parse, and under load a pool that opens past what it keeps idle
	// opens and closes connections all the time (database/sql keeps only
	// 2 idle by default). A request beyond the cap waits for a connection.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	st := sqlstore.New(d, db, db, o)
	// The leader renews its lease on connections of its own, never
	// waiting behind its own load for one.
	leases := stdlib.OpenDB(*cfg)
	leases.SetMaxOpenConns(2)
	leases.SetMaxIdleConns(2)
	st.SetLeasePool(leases)
	return st, nil
}

// maxConns is how many connections a server opens (and keeps), besides
// its two for the lease. Every connection counts against the database's
// max_connections (100 by default), shared by all replicas: three
// replicas take 66.
const maxConns = 20

// lockKey derives the advisory lock keys of a schema: key for migrations,
// key+1 for events.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("sparecap:" + schema))
	return int64(h.Sum64() &^ 1) // even, so key+1 cannot wrap into another schema's key
}

func migrate(ctx context.Context, db *sql.DB, key int64) error { return migrateTo(ctx, db, key, 0) }

// migrateTo migrates up to version (0: the last).
func migrateTo(ctx context.Context, db *sql.DB, key int64, version int64) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	// Replicas starting together must not migrate at once.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(key), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(locker),
		goose.WithSlog(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > 0 {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
