// Package memstore is a store.Store that keeps everything in process
// memory, for the fleet simulator: a month of a large fleet replays in
// seconds when no statement is parsed, planned or encoded. It answers as
// the SQLite backend does, to the byte: the same errors (domain.ErrNotFound
// for a missing row or parent, domain.ErrConflict for a taken key or a
// second live node on a machine, store.ErrFenced), the same orders of
// every listing, the same filters, the same bounds on text an outsider
// wrote (store.MaxText), and values read back as SQLite reads them: times
// in UTC to the microsecond with the zero time for NULL, AUTOINCREMENT keys
// that a skipped row still uses up, bulk writes in statements of the same
// sizes, each written whole or not at all. It passes the conformance
// suite (storetest.Run and storetest.RunCached), as every backend does.
//
// # Versions and transactions
//
// The database is one value, state, whose every table and index is a
// persistent B-tree (tree): a copy of it is a version that later writes do
// not change. The committed version is published through an atomic
// pointer, so reads take no lock and never wait. Update copies the
// committed version (in constant time), runs fn on the copy — its reads
// see its writes, which copy the B-tree nodes on their way once per
// transaction — and on success publishes the copy. An error, a panic or a
// fenced epoch leaves the committed version as it was: there is no undo
// log, and nothing but the data itself is kept. Updates run one at a time
// (a writer waits for the lock or gives up with its context), so they are
// serializable. The leader lease lives in the database like any row, and
// is the one place the store reads the wall clock, as a database server's
// clock.
//
// A DB is one database; every Store that DB.Open returns is a handle over
// it, so data outlives a handle's Close and is seen by the next (New is a
// DB of its own and its one handle).
//
// # Snapshot
//
// Snapshot gives store.Cached's contract: a table none of whose rows was
// written since the last Snapshot comes back as the very same slice
// (store.Same), so a planner keeps what it worked out from it; a written
// table as a new slice, in which a written node is a new pointer and every
// other node the pointer it was. A slice handed out is never changed.
// When nothing was written a Snapshot allocates nothing.
//
// # Memory
//
// A Store is a store.Memory, as the leader's copy (store.Cached) is, so
// the simulator needs no copy of the world besides the store's. Watch
// hands a watcher the committed version, then, after each Update that
// commits (through any handle of the DB), what it wrote of the
// snapshot's tables, as Cached reports it: the writes themselves note
// the rows they write, which are read back once the Update commits. The
// watchers are called in commit order, under the writers' lock, and are
// reset only when the handle they came through is closed. NodeNamed,
// ActiveOn and ClustersNamed read indexes of the live nodes by cluster
// and name, of the machines' claims, and of the clusters by project and
// name.
package memstore
