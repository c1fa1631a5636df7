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

// archiveEvery bounds how long a removed node stays in the live tables
// past the retention: the archive runs at least this often.
const archiveEvery = time.Hour

// pruneDue is when the next prune is due, after one at now: when the
// oldest event left (the first by Seq) passes the retention, and not
// within a minute; with no event left, a retention from now. An event
// written later is no older, so none is kept past its due time by more
// than a minute.
func (c *Controller) pruneDue(ctx context.Context, now time.Time) (time.Time, error) {
	next := now.Add(c.cfg.EventRetention)
	oldest, err := c.store.ListEvents(ctx, store.EventFilter{Limit: 1})
	if err != nil {
		return time.Time{}, err
	}
	if len(oldest) == 1 {
		next = oldest[0].Timestamp.Add(c.cfg.EventRetention)
	}
	return later(next, now.Add(time.Minute)), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
