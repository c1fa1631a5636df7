package sqlstore

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/store"
)

var _ store.Sizer = (*Store)(nil)

// TableSizes returns each table's rows and bytes by the dialect's query.
func (s *Store) TableSizes(ctx context.Context) ([]store.TableSize, error) {
	if s.d.TableSizes == "" {
		return nil, fmt.Errorf("%s: the store does not report table sizes", s.d.Name)
	}
	rows, err := s.r.QueryContext(ctx, s.d.TableSizes)
	if err != nil {
		return nil, fmt.Errorf("%s: table sizes: %w", s.d.Name, err)
	}
	defer rows.Close()
	var out []store.TableSize
	for rows.Next() {
		var t store.TableSize
		if err := rows.Scan(&t.Table, &t.Rows, &t.Bytes); err != nil {
			return nil, fmt.Errorf("%s: table sizes: %w", s.d.Name, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: table sizes: %w", s.d.Name, err)
	}
	return out, nil
}
