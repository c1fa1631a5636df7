package controller

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// Archiving moves removed nodes out of the live tables once nothing can
// change them any more (see store.Tx.ArchiveNodes): removed longer than the
// event retention ago, so a node leaves the hot table with its last event.
// Each batch is its own short transaction, and a pass moves at most
// archiveBatches of them so that a backlog (after an upgrade) drains over a
// few minutes instead of stalling one pass.
const (
	archiveBatch   = 1000
	archiveBatches = 20
)

// archive moves the nodes removed before removedBefore to history and
// returns how many it moved.
func (c *Controller) archive(ctx context.Context, removedBefore time.Time) (int, error) {
	total := 0
	for range archiveBatches {
		var n int
		err := c.store.Update(ctx, func(tx store.Tx) (err error) {
			n, err = tx.ArchiveNodes(ctx, removedBefore, archiveBatch)
			return err
		})
		total += n
		if err != nil || n < archiveBatch {
			return total, err
		}
	}
	return total, nil
}
