package postgres_test

import (
	"testing"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	postgres.TestDSN(t) // fail once, clearly, if PostgreSQL is down
	storetest.Run(t, newDB)
}

// TestConformanceCached: the suite passes on the leader's in-memory
// snapshot (store.Cached) as on the backend itself.
func TestConformanceCached(t *testing.T) {
	postgres.TestDSN(t)
	storetest.RunCached(t, newDB)
}

// TestMemory: the leader's copy over this store is a store.Memory.
func TestMemory(t *testing.T) {
	postgres.TestDSN(t)
	storetest.RunMemory(t, func(t *testing.T) store.Memory {
		c := store.NewCached(newDB(t)(t))
		c.Enable()
		return c
	})
}

func newDB(t *testing.T) storetest.Opener {
	dsn := postgres.TestDSN(t)
	return func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestTableSizes: the tables' bytes (rows are the planner's estimate).
func TestTableSizes(t *testing.T) {
	postgres.TestDSN(t)
	storetest.CheckTableSizes(t, newDB(t)(t), false)
}
