package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// TouchTokens records token uses in one transaction. It carries no epoch:
// every server, leader or not, records the uses it saw.
func (s *Store) TouchTokens(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	hashes := make([]string, 0, len(used))
	for h := range used {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes) // one order for every server: no deadlock between two
	err := s.updateOn(store.WithoutEpoch(ctx), s.w, func(stx store.Tx) error {
		q := stx.(*tx).q
		for _, h := range hashes {
			at := s.timeArg(used[h])
			if _, err := q.ExecContext(ctx, s.q.touchToken, at, h, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: record token uses: %w", s.d.Name, err)
	}
	return nil
}
