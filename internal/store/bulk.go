package store

import (
	"context"
	"errors"

	"github.com/sparecap/sparecap/internal/domain"
)

// NodesByID reads the nodes of ids in tx: in bulk where tx is a
// BulkReader, one by one otherwise. Unknown IDs are left out.
func NodesByID(ctx context.Context, tx Tx, ids []string) ([]domain.Node, error) {
	if b, ok := tx.(BulkReader); ok {
		return b.NodesByID(ctx, ids)
	}
	return eachByID(ctx, ids, tx.GetNode)
}

// ClustersByID is NodesByID for clusters (fully deleted ones left out).
func ClustersByID(ctx context.Context, tx Tx, ids []string) ([]domain.Cluster, error) {
	if b, ok := tx.(BulkReader); ok {
		return b.ClustersByID(ctx, ids)
	}
	return eachByID(ctx, ids, tx.GetCluster)
}

// MachinesByID is NodesByID for machines.
func MachinesByID(ctx context.Context, tx Tx, ids []string) ([]domain.Machine, error) {
	if b, ok := tx.(BulkReader); ok {
		return b.MachinesByID(ctx, ids)
	}
	return eachByID(ctx, ids, tx.GetMachine)
}

func eachByID[T any](ctx context.Context, ids []string, get func(context.Context, string) (T, error)) ([]T, error) {
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		v, err := get(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// The reads of a Cached transaction go to the backend's.

var (
	_ BulkReader = (*recordingTx)(nil)
	_ BulkWriter = (*recordingTx)(nil)
)

func (t *recordingTx) NodesByID(ctx context.Context, ids []string) ([]domain.Node, error) {
	return NodesByID(ctx, t.Tx, ids)
}

func (t *recordingTx) ClustersByID(ctx context.Context, ids []string) ([]domain.Cluster, error) {
	return ClustersByID(ctx, t.Tx, ids)
}

func (t *recordingTx) MachinesByID(ctx context.Context, ids []string) ([]domain.Machine, error) {
	return MachinesByID(ctx, t.Tx, ids)
}

// BulkWriter writes many rows in few statements. The SQL stores'
// transactions implement it.
type BulkWriter interface {
	// PutUsages is PutUsage of each record, in order.
	PutUsages(ctx context.Context, us []domain.UsageRecord) error
	// CreateNodes is CreateNode of each node, except that on ErrConflict
	// which of them were created is not said.
	CreateNodes(ctx context.Context, ns []domain.Node) error
	// AddEvents is AddEvent of each event, in order (their Seqs follow
	// that order), without handing the Seqs back.
	AddEvents(ctx context.Context, es []domain.Event) error
	// UpdateNodes is UpdateNode of each node, except that on an error
	// which of them were written is not said.
	UpdateNodes(ctx context.Context, ns []domain.Node) error
	// UpdateClusters is UpdateNodes for clusters (UpdateCluster of each).
	UpdateClusters(ctx context.Context, cs []domain.Cluster) error
	// CreateClusters is CreateCluster of each cluster, except that on
	// ErrConflict which of them were created is not said.
	CreateClusters(ctx context.Context, cs []domain.Cluster) error
}

// PutUsages writes records in tx: in bulk where tx is a BulkWriter, one
// by one otherwise.
func PutUsages(ctx context.Context, tx Tx, us []domain.UsageRecord) error {
	if b, ok := tx.(BulkWriter); ok {
		return b.PutUsages(ctx, us)
	}
	return Each(ctx, us, tx.PutUsage)
}

// AddEvents adds events in tx: in bulk where tx is a BulkWriter, one by
// one otherwise.
func AddEvents(ctx context.Context, tx Tx, es []domain.Event) error {
	if b, ok := tx.(BulkWriter); ok {
		return b.AddEvents(ctx, es)
	}
	return Each(ctx, es, func(ctx context.Context, e domain.Event) error {
		_, err := tx.AddEvent(ctx, e)
		return err
	})
}

func (t *recordingTx) AddEvents(ctx context.Context, es []domain.Event) error {
	return AddEvents(ctx, t.Tx, es) // events are none of the copy's tables
}

func (t *recordingTx) PutUsages(ctx context.Context, us []domain.UsageRecord) error {
	return PutUsages(ctx, t.Tx, us) // usage is none of the copy's tables
}

// CreateNodes creates nodes in tx: in bulk where tx is a BulkWriter, one
// by one otherwise.
func CreateNodes(ctx context.Context, tx Tx, ns []domain.Node) error {
	return bulkOr(ctx, tx, ns, BulkWriter.CreateNodes, tx.CreateNode)
}

// bulkOr writes rows with many where tx is a BulkWriter, else one by one.
func bulkOr[T any](ctx context.Context, tx Tx, rows []T, many func(BulkWriter, context.Context, []T) error, one func(context.Context, T) error) error {
	if b, ok := tx.(BulkWriter); ok {
		return many(b, ctx, rows)
	}
	return Each(ctx, rows, one)
}

// CreateClusters is CreateNodes for clusters.
func CreateClusters(ctx context.Context, tx Tx, cs []domain.Cluster) error {
	return bulkOr(ctx, tx, cs, BulkWriter.CreateClusters, tx.CreateCluster)
}

func (t *recordingTx) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	// As for updates, the copy re-reads every row named: one not created
	// is not found and stays out.
	return t.clusters(CreateClusters(ctx, t.Tx, cs), cs)
}

func (t *recordingTx) CreateNodes(ctx context.Context, ns []domain.Node) error {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	err := CreateNodes(ctx, t.Tx, ns)
	if err != nil {
		// Some may have been created, and the transaction may still
		// commit: note the ones that are there now.
		there, rerr := NodesByID(ctx, t.Tx, ids)
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		ids = ids[:0]
		for _, n := range there {
			ids = append(ids, n.ID)
		}
	}
	t.w.nodeIDs = append(t.w.nodeIDs, ids...)
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

// UpdateNodes updates nodes in tx: in bulk where tx is a BulkWriter, one
// by one otherwise.
func UpdateNodes(ctx context.Context, tx Tx, ns []domain.Node) error {
	return bulkOr(ctx, tx, ns, BulkWriter.UpdateNodes, tx.UpdateNode)
}

// UpdateClusters is UpdateNodes for clusters.
func UpdateClusters(ctx context.Context, tx Tx, cs []domain.Cluster) error {
	return bulkOr(ctx, tx, cs, BulkWriter.UpdateClusters, tx.UpdateCluster)
}

// The copy re-reads every row a bulk update named, written or not (on an
// error some may have been): re-reading an unchanged row is harmless.

func (t *recordingTx) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	err := UpdateNodes(ctx, t.Tx, ns)
	for _, n := range ns {
		t.w.nodeIDs = append(t.w.nodeIDs, n.ID)
	}
	return err
}

func (t *recordingTx) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	return t.clusters(UpdateClusters(ctx, t.Tx, cs), cs)
}

// clusters notes cs to be read back, whatever err (the result of writing
// them) says, and returns err.
func (t *recordingTx) clusters(err error, cs []domain.Cluster) error {
	for _, c := range cs {
		t.w.clusterIDs = append(t.w.clusterIDs, c.ID)
	}
	return err
}
