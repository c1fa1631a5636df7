package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// The leader lease is one row (id 1) of table leader, created by the
// migration. Its times are microseconds by the database's clock
// (Dialect.NowMicros), never a server's.

func (s *Store) AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (store.Lease, bool, error) {
	if holder == "" {
		return store.Lease{}, false, errors.New("acquire lease: empty holder")
	}
	now := s.d.NowMicros
	var epoch, expires, at int64
	won := false
	// The lease and the epoch fenced commits read change together.
	err := s.updateOn(ctx, s.l, func(stx store.Tx) error {
		q := stx.(*tx).q
		err := q.QueryRowContext(ctx, rebind(s.d, `UPDATE leader SET holder = ?, address = ?, epoch = epoch + 1,
			expires_at = `+now+` + ? WHERE id = 1 AND (holder = '' OR holder = ? OR expires_at <= `+now+`)
			RETURNING epoch, expires_at, `+now), holder, address, ttl.Microseconds(), holder).Scan(&epoch, &expires, &at)
		if errors.Is(err, sql.ErrNoRows) {
			won = false
			return nil
		}
		if err != nil {
			return err
		}
		won = true
		_, err = q.ExecContext(ctx, rebind(s.d, `UPDATE leader_epoch SET epoch = ? WHERE id = 1`), epoch)
		return err
	})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("%s: acquire lease: %w", s.d.Name, err)
	}
	if !won {
		return store.Lease{}, false, nil
	}
	return store.Lease{Holder: holder, Address: address, Epoch: epoch,
		Expires: time.UnixMicro(expires).UTC(), Now: time.UnixMicro(at).UTC()}, true, nil
}

func (s *Store) RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (bool, error) {
	res, err := s.l.ExecContext(ctx, rebind(s.d, `UPDATE leader SET expires_at = `+s.d.NowMicros+` + ?
		WHERE id = 1 AND holder = ? AND epoch = ?`), ttl.Microseconds(), holder, epoch)
	if err != nil {
		return false, fmt.Errorf("%s: renew lease: %w", s.d.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: renew lease: %w", s.d.Name, err)
	}
	return n == 1, nil
}

func (s *Store) ReleaseLease(ctx context.Context, holder string, epoch int64) error {
	_, err := s.l.ExecContext(ctx, rebind(s.d, `UPDATE leader SET holder = '', address = '', expires_at = 0
		WHERE id = 1 AND holder = ? AND epoch = ?`), holder, epoch)
	if err != nil {
		return fmt.Errorf("%s: release lease: %w", s.d.Name, err)
	}
	return nil
}

func (s *Store) GetLease(ctx context.Context) (store.Lease, error) {
	var l store.Lease
	var expires, at int64
	db := s.r
	if s.l != s.w {
		db = s.l // the lease's own pool
	}
	err := db.QueryRowContext(ctx, `SELECT holder, address, epoch, expires_at, `+s.d.NowMicros+` FROM leader WHERE id = 1`).
		Scan(&l.Holder, &l.Address, &l.Epoch, &expires, &at)
	if err != nil {
		return l, fmt.Errorf("%s: read lease: %w", s.d.Name, err)
	}
	l.Expires, l.Now = time.UnixMicro(expires).UTC(), time.UnixMicro(at).UTC()
	return l, nil
}

// fence checks, inside transaction q, that epoch is still the current term
// (see store.WithEpoch). Dialect.FenceLock makes the read hold the row
// until the transaction ends, so a new term cannot begin before the
// commit.
func (s *Store) fence(ctx context.Context, q querier, epoch int64) error {
	if epoch < 0 {
		return store.ErrFenced
	}
	var cur int64
	if err := q.QueryRowContext(ctx, `SELECT epoch FROM leader_epoch WHERE id = 1`+s.d.FenceLock).Scan(&cur); err != nil {
		return fmt.Errorf("%s: read leader epoch: %w", s.d.Name, err)
	}
	if cur != epoch {
		return fmt.Errorf("%w (term %d; term %d began)", store.ErrFenced, epoch, cur)
	}
	return nil
}
