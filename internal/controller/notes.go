package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// RecordNote takes a lifecycle event a driver asks for (driver.NodeNote);
// the next pass records it. It never blocks.
func (c *Controller) RecordNote(n driver.NodeNote) {
	c.notes.push(n)
	c.Kick()
}

// recordNotes records the notes RecordNote queued, as events of their
// nodes. A note whose cluster is gone is dropped; one that cannot be
// written is kept for the next pass.
func (c *Controller) recordNotes(ctx context.Context) error {
	notes := c.notes.take()
	if len(notes) == 0 {
		return nil
	}
	c.lock(ctx)
	defer c.mu.Unlock()
	var obs []Observation
	var errs []error
	for _, nt := range notes {
		e := domain.Event{ID: c.NewID("ev-"), ClusterID: nt.ClusterID, NodeName: nt.NodeName, Reason: nt.Reason,
			Message: nt.Message, Timestamp: c.clock.Now()}
		if n, ok := c.nodeNamed(ctx, nt.ClusterID, nt.NodeName); ok {
			e.NodeID = n.ID
		}
		err := c.store.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.GetCluster(ctx, nt.ClusterID); err != nil {
				return err
			}
			_, err := tx.AddEvent(ctx, e)
			return err
		})
		switch {
		case errors.Is(err, domain.ErrNotFound):
		case err != nil:
			c.notes.push(nt)
			errs = append(errs, fmt.Errorf("record a note on node %s: %w", nt.NodeName, err))
		default:
			obs = append(obs, Observation{Time: e.Timestamp, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message})
		}
	}
	c.observe(obs)
	if len(obs) > 0 {
		c.notify()
	}
	return errors.Join(errs...)
}
