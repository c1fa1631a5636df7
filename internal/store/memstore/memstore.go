package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sparecap/sparecap/internal/store"
)

// DB is one database in memory. Every Store that Open returns over it
// reads and writes the same data, which outlives each of them.
type DB struct {
	// lock is held by the one Update (or lease write) running: a
	// channel, so a writer waiting for it gives up with its context.
	lock chan struct{}
	// cur is the committed version, which readers read without a lock.
	cur  atomic.Pointer[state]
	gens atomic.Uint64
	snap snapshots
	// notes are what the running Update wrote of the snapshot's tables,
	// for watchers, which follow every commit of the DB.
	notes    notes
	watchers watchers
}

// NewDB returns an empty database.
func NewDB() *DB {
	d := &DB{lock: make(chan struct{}, 1)}
	d.cur.Store(newState())
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

// view is the committed version, or none on a closed handle (its reads
// then fail).
func (s *Store) view() view {
	if s.closed.Load() {
		return view{}
	}
	return view{st: s.d.cur.Load()}
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

// nextGen is a generation no version of d has used.
func (d *DB) nextGen() uint64 { return d.gens.Add(1) }

// Update runs fn on a version of its own of the database and, if fn
// succeeds, makes that version the committed one and tells the watchers
// (Watch) what it wrote. Updates run one at a time, so they are
// serializable; fn runs once.
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
	if err := s.d.acquire(ctx); err != nil {
		return fmt.Errorf("memstore: begin: %w", err)
	}
	defer s.d.release()
	base := s.d.cur.Load()
	if epoch, ok := store.EpochOf(ctx); ok {
		if err := fence(base, epoch); err != nil {
			return err
		}
	}
	next := *base
	s.d.notes.reset()
	t := &tx{view: view{st: &next}, d: s.d, gen: s.d.nextGen()}
	// Whichever way fn ends (an error, a panic, runtime.Goexit), the
	// transaction takes no more writes; only a success commits.
	defer func() { t.done = true }()
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: commit: %w", err)
	}
	if t.wrote {
		s.d.cur.Store(t.st)
	}
	if tell {
		s.d.tell(s.d.cur.Load(), store.TagOf(ctx))
	}
	return nil
}

// tx is a transaction: a version of the database that only it writes,
// in generation gen.
type tx struct {
	view
	d     *DB
	gen   uint64
	done  bool
	wrote bool
}

var _ store.Tx = (*tx)(nil)

// write checks that t may write, and notes that it does.
func (t *tx) write(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	t.wrote = true
	return nil
}

// view reads one version of the database: the committed one, or a
// transaction's own.
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
