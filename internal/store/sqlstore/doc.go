// Package sqlstore implements store.Store once, over database/sql, for every
// SQL backend. The backends (packages sqlite and postgres) differ only in a
// Dialect: how placeholders are written, how a time is passed as a
// parameter, which transaction options give the isolation the store
// promises, and which driver errors mean "retry" or "missing parent row".
//
// # Encoding
//
// Every time is truncated to the microsecond and written in UTC, so that
// both backends keep exactly the same instant and a value read back is
// reflect.DeepEqual to the value written (given microsecond input). The
// zero time.Time is written as NULL and read back as the zero value, so
// "not set yet" (Node.DrainedAt, Cluster.DeletedAt, …) survives a round
// trip. Strings and enums are stored as text, never NULL: the empty string
// is a value (Machine.ReservationID "" is the on-demand pool, Event.NodeID
// "" a cluster-level event).
//
// # Ordering
//
// Listings are deterministic so that the allocator, which plans on a
// Snapshot, produces the same plan from the same state on every backend:
// projects, reservations, machines, clusters and nodes come oldest first
// (created_at, zero times first, then id); events come in Seq order.
//
// # Transactions
//
// Update runs fn in one transaction with serializable semantics: SQLite
// has a single writer; PostgreSQL runs SERIALIZABLE and Update re-runs fn
// on a serialization failure, a bounded number of times. fn must therefore
// have no effect outside the Tx it is given, and must not call Update
// itself (with SQLite's single writer that would wait forever). Create* never leave a
// transaction unusable on a duplicate ID (they insert with ON CONFLICT DO
// NOTHING), so a caller may branch on domain.ErrConflict and carry on.
//
// # Event sequence
//
// Seq is the paging cursor of ListEvents, so a reader that has seen Seq n
// must never later see a new event with Seq <= n. AddEvent therefore takes
// the dialect's event lock before drawing a Seq (PostgreSQL sequences are
// not transactional: without the lock a transaction could draw a smaller
// Seq and commit after a larger one is already visible). Replacing an
// event by its (ClusterID, NodeID, Reason) key deletes the old row and
// inserts a new one, so the replacement sorts after everything already
// seen; SQLite uses AUTOINCREMENT so a deleted maximum Seq is never reused.
package sqlstore
