package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/random"

	"github.com/sparecap/sparecap/internal/store"
)

// Dialect is what differs between SQL backends.
type Dialect struct {
	// Name appears in error messages.
	Name string
	// NumberedPlaceholders: write $1, $2, … instead of ?.
	NumberedPlaceholders bool
	// TimeArg encodes a non-zero, UTC, microsecond-truncated time as a
	// query parameter. Zero times are always passed as NULL.
	TimeArg func(time.Time) any
	// UpdateTx and SnapshotTx are the options Update and Snapshot begin
	// their transactions with.
	UpdateTx, SnapshotTx sql.TxOptions
	// Retryable reports whether a failed Update may be re-run from the
	// start (serialization failure, deadlock). Nil: never.
	Retryable func(error) bool
	// ForeignKeyViolation reports whether err says a referenced row is
	// missing. Nil: never.
	ForeignKeyViolation func(error) bool
	// UniqueViolation reports whether err says a unique index refused a
	// row (a second live node on a machine). Nil: never.
	UniqueViolation func(error) bool
	// NowMicros is an SQL expression for the database's clock, in
	// microseconds since the Unix epoch (the leader lease's clock).
	NowMicros string
	// FenceLock is appended to the read of the leader epoch in a fenced
	// Update (e.g. " FOR SHARE") so the row stays as read until the
	// commit; empty where the transaction already holds the write lock.
	FenceLock string
	// UpsertDefault: the database sets an identity column to its next
	// value in ON CONFLICT DO UPDATE (PostgreSQL), so AddEvent replaces an
	// event in one statement, one round trip. A dialect that stores
	// events sets this or InsertOrReplace.
	UpsertDefault bool
	// InsertOrReplace: INSERT OR REPLACE deletes the row a new one
	// conflicts with on a unique key and inserts the new one with a new
	// AUTOINCREMENT key (SQLite), so AddEvent and AddEvents replace events
	// in one statement, as UpsertDefault does.
	InsertOrReplace bool
	// BulkUpdate: UpdateNodes and UpdateClusters write up to 32 rows per
	// statement, an UPDATE from a VALUES list whose parameters carry
	// PostgreSQL type names. Without, they write one row per statement.
	BulkUpdate bool
	// Lateral: the database joins LATERAL subqueries (PostgreSQL), which
	// the due-deliveries read uses to take a few rows per endpoint by
	// index; without it (SQLite) the read drives the same index searches
	// with a correlated IN, which PostgreSQL would instead run per row.
	Lateral bool
	// EventLock, when set, runs in AddEvent before a Seq is drawn and
	// must hold until the transaction ends (see the package doc).
	EventLock string
	// MaxScans, when positive, bounds how many ScanUsage run at once
	// outside a transaction (see scan.go).
	MaxScans int
	// TableSizes is a query of each table's name, rows and bytes
	// (store.Sizer); empty: the backend does not say.
	TableSizes string
}

// Options are the caller's choices of a Store (New, and the backends'
// OpenWith). Zero values take the defaults.
type Options struct {
	// Clock times the retries of an Update that met a conflict: wall
	// time, as the conflict is the database's (default clock.Real{}).
	Clock clock.Clock
}

// maxAttempts bounds how often Update runs fn when the backend keeps
// reporting serialization failures; contention that high is a bug to
// surface, not to hide.
const maxAttempts = 20

// Store implements store.Store over database/sql.
type Store struct {
	d Dialect
	// w serves Update; r serves reads and Snapshot. They are the same
	// pool except where the backend wants a single writer connection.
	w, r *sql.DB
	// l serves the leader lease (default w): a pool of its own lets the
	// leader renew without waiting for a connection behind its own load.
	l         *sql.DB
	closeOnce sync.Once
	closeErr  error
	q         queries
	hq        historyQueries
	bq        byIDQueries
	wq        webhookQueries
	scans     chan struct{} // ScanUsage slots; nil: unbounded
	// retryClock and retryRandom time and jitter the retries of Update:
	// Options.Clock and a source seeded from entropy.
	retryClock  clock.Clock
	retryRandom *random.Source
}

// updateBackoff spaces the attempts of a transaction that met a conflict:
// from 1 ms doubling to 100 ms, each drawn between half and one and a half
// of it, so contending writers do not collide again in step.
var updateBackoff = backoff.Policy{First: time.Millisecond, Max: 100 * time.Millisecond, Low: 50, High: 150}

var _ store.Store = (*Store)(nil)

// New returns a Store over write and read, which may be the same pool. The
// schema must already be migrated. Close closes both pools.
func New(d Dialect, write, read *sql.DB, o Options) *Store {
	if read == nil {
		read = write
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	s := &Store{d: d, w: write, r: read, l: write, q: buildQueries(d), hq: buildHistoryQueries(d), bq: buildByIDQueries(d),
		wq: buildWebhookQueries(d), retryClock: o.Clock, retryRandom: random.FromEntropy()}
	if d.MaxScans > 0 {
		s.scans = make(chan struct{}, d.MaxScans)
	}
	return s
}

// Close closes the database; calling it again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		err := s.w.Close()
		if s.r != s.w {
			err = errors.Join(err, s.r.Close())
		}
		if s.l != s.w {
			err = errors.Join(err, s.l.Close())
		}
		s.closeErr = err
	})
	return s.closeErr
}

// SetLeasePool makes the lease methods use db, which Close then closes.
func (s *Store) SetLeasePool(db *sql.DB) { s.l = db }

// Pools returns the connection pools of writes, reads and the lease (for
// tests and diagnostics; they may be the same pool).
func (s *Store) Pools() (write, read, lease *sql.DB) { return s.w, s.r, s.l }

// Update runs fn in a transaction and commits it, re-running it on a
// retryable failure.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.updateOn(ctx, s.w, fn)
}

func (s *Store) updateOn(ctx context.Context, db *sql.DB, fn func(store.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.update(ctx, db, fn)
		if err == nil || s.d.Retryable == nil || !s.d.Retryable(err) || errors.Is(err, store.ErrFenced) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%s: update: gave up after %d attempts: %w", s.d.Name, attempt, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: update: %w (after %v)", s.d.Name, ctx.Err(), err)
		case <-s.retryClock.After(updateBackoff.Gap(attempt, s.retryRandom)):
		}
	}
}

func (s *Store) update(ctx context.Context, db *sql.DB, fn func(store.Tx) error) error {
	sqlTx, err := db.BeginTx(ctx, &s.d.UpdateTx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", s.d.Name, err)
	}
	// Roll back on every way out but a commit: an error, a panic, or
	// runtime.Goexit (t.Fatal inside fn), which recover does not see.
	done := false
	defer func() {
		if !done {
			_ = sqlTx.Rollback()
		}
	}()
	if epoch, ok := store.EpochOf(ctx); ok {
		if err := s.fence(ctx, sqlTx, epoch); err != nil {
			return err
		}
	}
	if err := fn(&tx{reader: reader{s: s, q: sqlTx}}); err != nil {
		return err
	}
	done = true
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", s.d.Name, err)
	}
	return nil
}

// Snapshot reads the planning state in one read-only transaction.
func (s *Store) Snapshot(ctx context.Context) (snap store.Snapshot, err error) {
	sqlTx, err := s.r.BeginTx(ctx, &s.d.SnapshotTx)
	if err != nil {
		return snap, fmt.Errorf("%s: snapshot: begin: %w", s.d.Name, err)
	}
	defer func() { _ = sqlTx.Rollback() }()
	r := reader{s: s, q: sqlTx}
	if snap.Machines, err = r.ListMachines(ctx); err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	if snap.Reservations, err = r.ListReservations(ctx); err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	if snap.Clusters, err = r.ListClusters(ctx, ""); err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	nodes, err := r.ListNodes(ctx, store.NodeFilter{})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	snap.Nodes = store.Pointers(nodes)
	return snap, nil
}

// rebind rewrites ? placeholders for dialects that number them. The
// queries of this package never contain a literal '?'.
func rebind(d Dialect, q string) string {
	if !d.NumberedPlaceholders {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// timeArg encodes t for a query parameter: NULL when zero, UTC and
// truncated to the microsecond otherwise.
func (s *Store) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	t = readBack(t)
	if s.d.TimeArg == nil {
		return t
	}
	return s.d.TimeArg(t)
}

// columnText is a TEXT column's value as the drivers hand it over (NULL
// is empty), for the columns that hold JSON.
func columnText(v any, what string) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	}
	return nil, fmt.Errorf("scan %s: unsupported column type %T", what, v)
}

// timeCol scans a column written by timeArg: NULL, microseconds since the
// Unix epoch, or a driver time.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.t = time.Time{}
	case int64:
		*c.t = time.UnixMicro(v).UTC()
	case time.Time:
		*c.t = v.Truncate(time.Microsecond).UTC()
	default:
		return fmt.Errorf("scan time: unsupported column type %T", v)
	}
	return nil
}
