package memstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// leader is the leader lease (the SQL backends' leader row): its holder
// until expires (microseconds by the store's clock), and the epoch of its
// term, which fenced Updates check.
type leader struct {
	holder, address string
	epoch, expires  int64
}

// now is the store's clock, in microseconds since the Unix epoch: the
// wall clock, read only here. The store stands for a database server,
// whose clock the SQL backends read for the lease (so the servers' clocks
// need not agree); it is the one time the store makes up rather than
// being given.
func now() int64 { return time.Now().UnixMicro() }

// fence checks that epoch is the current term (see store.WithEpoch): a
// negative epoch fails without looking.
func fence(st *state, epoch int64) error {
	if epoch < 0 {
		return store.ErrFenced
	}
	if st.epoch != epoch {
		return fmt.Errorf("%w (term %d; term %d began)", store.ErrFenced, epoch, st.epoch)
	}
	return nil
}

// lease is l as read at clock reading at.
func (l leader) lease(at int64) store.Lease {
	return store.Lease{Holder: l.holder, Address: l.address, Epoch: l.epoch,
		Expires: time.UnixMicro(l.expires).UTC(), Now: time.UnixMicro(at).UTC()}
}

func (s *Store) AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (store.Lease, bool, error) {
	if holder == "" {
		return store.Lease{}, false, errors.New("acquire lease: empty holder")
	}
	var l store.Lease
	won := false
	// An Update, fenced as any: the lease and the epoch change together.
	err := s.update(ctx, func(t *tx) error {
		at, cur := now(), t.st.leader
		if won = cur.holder == "" || cur.holder == holder || cur.expires <= at; !won {
			return nil
		}
		t.lock()
		defer t.unlock()
		t.st.leader = leader{holder: holder, address: address, epoch: cur.epoch + 1, expires: at + ttl.Microseconds()}
		l = t.st.leader.lease(at)
		return nil
	}, false)
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("memstore: acquire lease: %w", err)
	}
	return l, won, nil
}

func (s *Store) RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (bool, error) {
	ok := false
	err := s.leaseWrite(ctx, func(l *leader) {
		if ok = l.holder == holder && l.epoch == epoch; ok {
			l.expires = now() + ttl.Microseconds()
		}
	})
	if err != nil {
		return false, fmt.Errorf("memstore: renew lease: %w", err)
	}
	return ok, nil
}

func (s *Store) ReleaseLease(ctx context.Context, holder string, epoch int64) error {
	err := s.leaseWrite(ctx, func(l *leader) {
		if l.holder == holder && l.epoch == epoch {
			l.holder, l.address, l.expires = "", "", 0
		}
	})
	if err != nil {
		return fmt.Errorf("memstore: release lease: %w", err)
	}
	return nil
}

// leaseWrite changes the lease in a write of its own, never fenced (as
// the SQL backends' single statements on the lease row are not).
func (s *Store) leaseWrite(ctx context.Context, change func(*leader)) error {
	return s.update(store.WithoutEpoch(ctx), func(t *tx) error {
		l := t.st.leader
		if change(&l); l != t.st.leader {
			t.lock()
			t.st.leader = l
			t.unlock()
		}
		return nil
	}, false)
}

func (s *Store) GetLease(ctx context.Context) (store.Lease, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	if err := v.check(ctx); err != nil {
		return store.Lease{}, fmt.Errorf("memstore: read lease: %w", err)
	}
	return v.st.leader.lease(now()), nil
}
