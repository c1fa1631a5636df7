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
// suite (storetest.Run and storetest.RunCached), as every backend does,
// and storetest.RunMemory, as the leader's copy does.
//
// # Transactions
//
// The database is one value, state: every table and index is a B-tree
// (tree), and a few counters. Updates run one at a time (a writer waits
// for the lock or gives up with its context), so they are serializable,
// and change the database in place: a write of a tree logs what it
// replaced, an error, a panic or a fenced epoch reverts the Update's
// writes from the logs, and a commit forgets them. A node step's commit
// allocates its new rows and little else: a tree reuses the nodes it
// drops.
//
// A reader holds a read lock (DB.mu) while it reads; the running Update
// holds it alone for each of its writes, and to commit, so a reader
// waits for a write, never for an Update. A reader that comes after the
// running Update wrote reads the committed version, which the first of
// them makes: a copy of the trees' headers with the Update's writes
// reverted from the logs, in a generation of its own (a tree changes in
// place only the nodes of the writing generation, and copies the others
// on its way), after which the Update writes in a new generation, so it
// copies what that version shares rather than changing it. It costs in
// proportion to what the Update wrote, and is made only when a reader
// comes while an Update is open: a server's reads while the leader
// writes, or a read that an Update's fn makes outside its transaction.
// The leader lease lives in the database like any row, and is the one
// place the store reads the wall clock, as a database server's clock.
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
