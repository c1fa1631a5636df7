package store

import (
	"context"
	"time"
)

// RetentionWriter deletes the records of the past that have no rollup,
// a slice at a time, oldest first.
type RetentionWriter interface {
	// PruneLostWork deletes up to limit of the lost-work entries noticed
	// before before, returning how many went.
	PruneLostWork(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneNodeHistory deletes up to limit of the archived nodes (see
	// ArchiveNodes) removed before before: GetNode no longer finds them.
	PruneNodeHistory(ctx context.Context, before time.Time, limit int) (int, error)
}
