package postgres_test

import (
	"sync"
	"testing"

	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

// TestPoolKeepsItsConnections: more concurrent requests than the pool
// keeps idle wait for a connection instead of opening one that is closed
// again as soon as it is idle. Under load that churn cost the database a
// process and every statement a new parse per request.
func TestPoolKeepsItsConnections(t *testing.T) {
	st, err := postgres.Open(t.Context(), postgres.TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, _, _ := st.(*sqlstore.Store).Pools()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := st.Snapshot(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := w.Stats()
	if s.MaxOpenConnections == 0 || s.MaxOpenConnections > 20 {
		t.Errorf("the pool may open %d connections (0 is unbounded), want at most 20", s.MaxOpenConnections)
	}
	if s.MaxIdleClosed != 0 || s.OpenConnections > 20 {
		t.Errorf("64 concurrent readers: %d connections open, %d closed for want of an idle slot; want at most 20 and none closed", s.OpenConnections, s.MaxIdleClosed)
	}
	if s.WaitCount == 0 {
		t.Errorf("no request waited for a connection: the load did not exceed the pool, the test shows nothing")
	}
}
