package memstore_test

import (
	"testing"

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
