package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

// TestLeaseHasItsOwnConnections: a leader whose every connection is busy
// with its own work still renews its lease, because the lease has a pool
// of its own. With the lease on the main pool (as before) the renewal
// waits for a connection until its deadline.
func TestLeaseHasItsOwnConnections(t *testing.T) {
	dsn := postgres.TestDSN(t)
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*sqlstore.Store)
	l, ok, err := s.AcquireLease(t.Context(), "a", "http://a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	w, _, lease := s.Pools()
	if lease == w {
		t.Fatal("the lease shares the main pool")
	}
	// Every connection of the main pool is taken by an open transaction.
	w.SetMaxOpenConns(1)
	busy, err := w.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Rollback()
	renew := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		ok, err := s.RenewLease(ctx, "a", l.Epoch, time.Minute)
		if err == nil && !ok {
			t.Fatal("the renewal found the term over")
		}
		return err
	}
	if err := renew(); err != nil {
		t.Fatalf("renew with the main pool busy: %v", err)
	}
	if _, err := s.GetLease(t.Context()); err != nil {
		t.Fatalf("read the lease with the main pool busy: %v", err)
	}
	// The control: on the busy main pool the same renewal cannot finish.
	s.SetLeasePool(w)
	defer s.SetLeasePool(lease)
	if err := renew(); err == nil {
		t.Fatal("a renewal on the busy main pool succeeded: the test shows nothing")
	}
}
