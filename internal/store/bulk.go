package store

import (
	"context"
	"errors"

	"github.com/sparecap/sparecap/internal/domain"
)

// A Cached transaction's bulk reads, and its bulk writes of the tables
// that are none of the copy's (events, usage), go to the backend's as
// they are; its bulk writes of the copy's tables are recorded.

var _ Tx = (*recordingTx)(nil)

func (t *recordingTx) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	// As for updates, the copy re-reads every row named: one not created
	// is not found and stays out.
	return t.clusters(t.Tx.CreateClusters(ctx, cs), cs)
}

func (t *recordingTx) CreateNodes(ctx context.Context, ns []domain.Node) error {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	err := t.Tx.CreateNodes(ctx, ns)
	if err != nil {
		// Some may have been created, and the transaction may still
		// commit: note the ones that are there now.
		there, rerr := t.Tx.NodesByID(ctx, ids)
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		ids = ids[:0]
		for _, n := range there {
			ids = append(ids, n.ID)
		}
	}
	t.w.noteNodes(ids...)
	return err
}

// Each runs one on every row in order, stopping at the first error.
func Each[T any](ctx context.Context, rows []T, one func(context.Context, T) error) error {
	for _, r := range rows {
		if err := one(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// The copy re-reads every row a bulk update named, written or not (on an
// error some may have been): re-reading an unchanged row is harmless.

func (t *recordingTx) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	err := t.Tx.UpdateNodes(ctx, ns)
	for _, n := range ns {
		t.w.noteNodes(n.ID)
	}
	return err
}

func (t *recordingTx) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	return t.clusters(t.Tx.UpdateClusters(ctx, cs), cs)
}

// clusters notes cs to be read back, whatever err (the result of writing
// them) says, and returns err.
func (t *recordingTx) clusters(err error, cs []domain.Cluster) error {
	for _, c := range cs {
		t.w.clusterIDs = append(t.w.clusterIDs, c.ID)
	}
	return err
}
