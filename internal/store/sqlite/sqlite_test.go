package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

func TestConformance(t *testing.T) { storetest.Run(t, newDB) }

// TestConformanceCached: the suite passes on the leader's in-memory
// snapshot (store.Cached) as on the backend itself.
func TestConformanceCached(t *testing.T) { storetest.RunCached(t, newDB) }

// TestMemory: the leader's copy over this store is a store.Memory.
func TestMemory(t *testing.T) {
	storetest.RunMemory(t, func(t *testing.T) store.Memory {
		c := store.NewCached(newDB(t)(t))
		c.Enable()
		return c
	})
}

func newDB(t *testing.T) storetest.Opener {
	path := filepath.Join(t.TempDir(), "sparecap.db")
	return func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestInMemory: ":memory:" gives a working private database. It cannot run
// the suite, whose Reopen test needs data to outlive Close.
func TestInMemory(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p"}); err != nil {
			return err
		}
		return tx.CreateCluster(ctx, domain.Cluster{ID: "c", ProjectID: "p"})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Reads go through the same connection and see the write.
	if _, err := s.GetCluster(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Snapshot(ctx); err != nil || len(snap.Clusters) != 1 {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
}

// TestInMemoryTwice: every ":memory:" database is a database of its own,
// migrated (the second starts from an image of the first, as migrated).
func TestInMemoryTwice(t *testing.T) {
	ctx := t.Context()
	var stores []store.Store
	for range 2 {
		s, err := sqlite.Open(ctx, ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	for i, s := range stores {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "p"}) })
		if err != nil {
			t.Fatalf("database %d: %v", i, err)
		}
		if ps, err := s.ListProjects(ctx); err != nil || len(ps) != 1 {
			t.Fatalf("database %d: projects %+v, %v", i, ps, err)
		}
	}
}

func TestBadPath(t *testing.T) {
	for _, p := range []string{"", "a.db?mode=ro", "a#b"} {
		if s, err := sqlite.Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestTableSizes: the tables' rows and bytes, counted from the pages.
func TestTableSizes(t *testing.T) { storetest.CheckTableSizes(t, newDB(t)(t), true) }
