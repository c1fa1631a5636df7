package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sparecap/sparecap/internal/store"
)

// DB is one database in memory. Every Store that Open returns over it
// reads and writes the same data, which outlives each of them.
type DB struct {
	// lock is held by the one Update (or lease write) running: a
	// channel, so a writer waiting for it gives up with its context.
	lock chan struct{}
	// mu keeps the readers off what the running Update changes: a reader
	// holds it shared while it reads, the Update alone while it writes
	// (one write at a time) and while it commits or rolls back.
	mu sync.RWMutex
	// st is the database, which the running Update changes in place
	// (under mu): dirty says it did, and then readers read frozen, the
	// committed version, which the first of them makes (freeze). saved
	// are st's counters as committed, while dirty.
	st     *state
	dirty  bool
	frozen *state
	saved  counters
	// w is the running Update's writer (under lock).
	w    writer
	seqs uint64
	gens atomic.Uint64
	snap snapshots
	// notes are what the running Update wrote of the snapshot's tables,
	// for watchers, which follow every commit of the DB.
	notes    notes
	watchers watchers
}

// NewDB returns an empty database.
func NewDB() *DB {
	d := &DB{lock: make(chan struct{}, 1), st: newState()}
	d.w.gen = d.nextGen()
	return d
}

// Open returns a new handle over d.
func (d *DB) Open() *Store { return &Store{d: d} }

// New returns a store over a database of its own.
func New() *Store { return NewDB().Open() }

// Store is a handle over a DB; it implements store.Store.
type Store struct {
	d      *DB
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// errClosed answers every call on a closed handle.
var errClosed = errors.New("memstore: the store is closed")

// errTxDone answers a write to a transaction whose Update returned.
var errTxDone = errors.New("memstore: the transaction is over")

// Close closes the handle (the data stays in its DB) and resets the
// watchers that came through it; calling it again does nothing.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.d.watchers.forget(s)
	return nil
}

// read takes d.mu shared for a read, which the caller ends with
// s.d.mu.RUnlock, and returns the committed version (none on a closed
// handle: its reads then fail).
func (s *Store) read() view {
	s.d.mu.RLock()
	if s.closed.Load() {
		return view{}
	}
	return view{st: s.d.committed()}
}

// committed is the committed version: st, or while the running Update
// has written, frozen, which it makes if need be. d.mu is held shared.
func (d *DB) committed() *state {
	for d.dirty && d.frozen == nil {
		d.mu.RUnlock()
		d.mu.Lock()
		if d.dirty && d.frozen == nil {
			d.freeze()
		}
		d.mu.Unlock()
		d.mu.RLock()
	}
	if d.dirty {
		return d.frozen
	}
	return d.st
}

// freeze makes frozen: a copy of st with the running Update's writes
// reverted, in a generation of its own, so it shares with st only nodes
// the Update has not changed; the Update writes in a new generation from
// then on, copying those. It costs in proportion to what the Update
// wrote. d.mu is held alone.
func (d *DB) freeze() {
	fz := new(state)
	*fz = *d.st
	fz.counters = d.saved
	gen := d.nextGen()
	for _, tr := range fz.tables() {
		if tr.loggedIn(d.w.seq) {
			tr.revert(gen)
		}
	}
	d.w.gen = d.nextGen()
	d.frozen = fz
}

// acquire takes the writer's lock, or gives up with ctx.
func (d *DB) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case d.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *DB) release() { <-d.lock }

// nextGen is a generation no tree node of d has.
func (d *DB) nextGen() uint64 { return d.gens.Add(1) }

// Update runs fn on the database, changing it in place, and keeps what
// fn wrote if it succeeds (and tells the watchers, see Watch), else
// reverts it. Updates run one at a time, so they are serializable; fn
// runs once. Readers never see what an Update wrote before it commits.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.update(ctx, func(t *tx) error { return fn(t) }, true)
}

// update runs fn as Update does; tell says whether the watchers hear of
// its commit (the writes of the lease and of token uses are none of
// theirs).
func (s *Store) update(ctx context.Context, fn func(*tx) error, tell bool) error {
	if s.closed.Load() {
		return errClosed
	}
	d := s.d
	if err := d.acquire(ctx); err != nil {
		return fmt.Errorf("memstore: begin: %w", err)
	}
	defer d.release()
	if epoch, ok := store.EpochOf(ctx); ok {
		if err := fence(d.st, epoch); err != nil {
			return err
		}
	}
	d.notes.reset()
	d.seqs++
	d.w.seq = d.seqs
	t := &tx{view: view{st: d.st}, d: d, w: &d.w}
	committed := false
	// Whichever way fn ends (an error, a panic, runtime.Goexit), the
	// transaction takes no more writes, nor reads (what it would read
	// is the next Update's); only a success commits.
	defer func() {
		t.done, t.view = true, view{}
		if !committed {
			d.end(false)
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: commit: %w", err)
	}
	d.end(true)
	committed = true
	if tell {
		d.tell(d.st, store.TagOf(ctx))
	}
	return nil
}

// end commits the running Update's writes, or reverts them, and lets the
// readers read st again.
func (d *DB) end(commit bool) {
	if !d.dirty {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !commit {
		for _, tr := range d.w.logs {
			tr.revert(d.w.gen)
		}
		d.st.counters = d.saved
	}
	for _, tr := range d.w.logs {
		tr.settle()
	}
	clear(d.w.logs)
	d.w.logs = d.w.logs[:0]
	d.dirty, d.frozen = false, nil
}

// tx is a transaction: it reads and writes the database itself, as
// writer w.
type tx struct {
	view
	d *DB
	w *writer
	// held counts the writes under way (one may call another): the
	// outermost holds d.mu.
	held int
	done bool
}

var _ store.Tx = (*tx)(nil)

// write checks that t may write and takes d.mu for the write, which the
// caller ends with unlock.
func (t *tx) write(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	t.lock()
	return nil
}

// lock keeps the readers off the database while t changes it; the first
// write of the Update saves the counters as committed.
func (t *tx) lock() {
	if t.held++; t.held > 1 {
		return
	}
	d := t.d
	d.mu.Lock()
	if !d.dirty {
		d.dirty, d.saved = true, d.st.counters
	}
}

func (t *tx) unlock() {
	if t.held--; t.held == 0 {
		t.d.mu.Unlock()
	}
}

// view reads the database: the committed version, or the running
// transaction's, its writes in it.
type view struct{ st *state }

// check says whether a read may go on: the handle is open and ctx is not
// done.
func (v view) check(ctx context.Context) error {
	if v.st == nil {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	return nil
}
