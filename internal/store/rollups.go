package store

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// RollupReader reads the rollups of closed months (domain.Rollup).
type RollupReader interface {
	// ScanRollups calls fn with the rows matching f, by month, cluster,
	// then the order they were put in (like ScanUsage: fn must not use
	// the store).
	ScanRollups(ctx context.Context, f RollupFilter, fn func(domain.Rollup) error) error
	// RollupState says which months are rolled and which cluster months
	// a late row touched since.
	RollupState(ctx context.Context) (domain.RollupState, error)
}

// RollupWriter writes the rollups, and the raw rows they outlive go in
// slices.
type RollupWriter interface {
	// PutRollups replaces the rows of a cluster's month (or its
	// project's merged rows: no ClusterID) with rows, whose Month,
	// ProjectID and ClusterID are cm's, and clears its dirty mark.
	PutRollups(ctx context.Context, cm domain.ClusterMonth, rows []domain.Rollup) error
	// MarkRolled records that every month before until is rolled for the
	// whole fleet (a time before the stored one changes nothing). From
	// then on a usage record or work span written with a time before it
	// marks its cluster's months dirty (RollupState): a late row.
	MarkRolled(ctx context.Context, until time.Time) error
	// MarkDirty marks cluster months to roll (again).
	MarkDirty(ctx context.Context, cms []domain.ClusterMonth) error
	// PruneUsage deletes up to limit of the final usage records that
	// ended before before and lie wholly in rolled months, returning how
	// many went.
	PruneUsage(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneWorkSpans deletes up to limit of the ended work spans that
	// ended before before and lie wholly in rolled months.
	PruneWorkSpans(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneClusterWork deletes up to limit of the clusters' work rows
	// (RollupWork, RollupMore) of months that start before before; the clusters'
	// usage and idle rows and the projects' merged rows stay.
	PruneClusterWork(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneLabelSets deletes up to limit of the label sets no rollup row
	// names any more.
	PruneLabelSets(ctx context.Context, limit int) (int, error)
}

// RollupFilter selects rollup rows: of a project or cluster (empty: all),
// of the months in [From, To) (zero: unbounded); Kinds, when not empty,
// only those; the clusters' rows, or with Merged the projects' merged
// rows.
type RollupFilter struct {
	ProjectID, ClusterID string
	From, To             time.Time
	Kinds                []domain.RollupKind
	Merged               bool
}

// MonthOf is the first instant of t's month, UTC.
func MonthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// DirtyMonths are the cluster months a row of cluster (of project)
// reaching back to from touches among those rolled before until: none
// when from is not before until.
func DirtyMonths(projectID, clusterID string, from, until time.Time) []domain.ClusterMonth {
	var out []domain.ClusterMonth
	for m := MonthOf(from); m.Before(until); m = m.AddDate(0, 1, 0) {
		out = append(out, domain.ClusterMonth{Month: m, ProjectID: projectID, ClusterID: clusterID})
	}
	return out
}
