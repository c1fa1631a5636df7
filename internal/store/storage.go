package store

import (
	"context"

	"github.com/sparecap/sparecap/internal/domain"
)

// StorageReader counts what each project's input makes the server keep.
type StorageReader interface {
	// ProjectStorage counts, for every project with any, the rows and
	// bytes of each table of domain.StorageTables it has: a scan of them
	// all, so the leader runs it seldom and counts what it writes since.
	ProjectStorage(ctx context.Context) ([]domain.StorageUse, error)
}

// StorageWriter sets projects' quotas and sheds their detail.
type StorageWriter interface {
	// SetStorageQuota sets a project's quota in bytes (0: the default);
	// domain.ErrNotFound without the project.
	SetStorageQuota(ctx context.Context, projectID string, bytes int64) error
	// PruneProjectSpans deletes up to limit of a project's ended work
	// spans that lie wholly in rolled months, whatever their retention
	// (a project over its quota sheds the detail its rollups keep).
	PruneProjectSpans(ctx context.Context, projectID string, limit int) (int, error)
}
