package memstore_test

import (
	"errors"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

func TestConformance(t *testing.T) { storetest.Run(t, newDB) }

// TestConformanceCached: the suite passes on the leader's in-memory copy
// (store.Cached) over this store as over the store itself.
func TestConformanceCached(t *testing.T) { storetest.RunCached(t, newDB) }

// newDB makes a database for one test; every store its Opener opens is a
// handle over it, so what one wrote and closed the next reads.
func newDB(*testing.T) storetest.Opener {
	db := memstore.NewDB()
	return func(*testing.T) store.Store { return db.Open() }
}

// TestMemory: the store is a store.Memory, as the leader's copy is.
func TestMemory(t *testing.T) {
	storetest.RunMemory(t, func(*testing.T) store.Memory { return memstore.New() })
}

// TestWatchClose: a watcher follows the commits of every handle of its
// DB, and is reset when the handle it came through is closed, and then
// only.
func TestWatchClose(t *testing.T) {
	ctx := t.Context()
	db := memstore.NewDB()
	a, b := db.Open(), db.Open()
	wa, wb := &resets{}, &resets{}
	if err := a.Watch(ctx, wa); err != nil {
		t.Fatal(err)
	}
	if err := b.Watch(ctx, wb); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("rolled back")
	_ = b.Update(ctx, func(store.Tx) error { return boom })
	if err := b.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "p"}) }); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "q"}) }); err != nil {
		t.Fatal(err)
	}
	if *wa != (resets{applied: 1, reset: 1}) || *wb != (resets{applied: 2}) {
		t.Fatalf("the watchers heard %+v (through the closed handle) and %+v", *wa, *wb)
	}
	if err := a.Watch(ctx, wa); err == nil {
		t.Fatal("a closed handle took a watcher")
	}
}

// resets counts what a watcher hears.
type resets struct{ applied, reset int }

func (r *resets) Load(store.Snapshot) {}
func (r *resets) Apply(store.Written) { r.applied++ }
func (r *resets) Reset()              { r.reset++ }
