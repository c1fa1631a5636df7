package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// reader implements store.Reader on the store's read pool or inside a
// transaction, whichever q is.
type reader struct {
	s *Store
	q querier
}

func (s *Store) rd() reader { return reader{s: s, q: s.r} }

// The Store reads outside any transaction, through the read pool.

func (s *Store) GetProject(ctx context.Context, id string) (domain.Project, error) {
	return s.rd().GetProject(ctx, id)
}
func (s *Store) ListProjects(ctx context.Context) ([]domain.Project, error) {
	return s.rd().ListProjects(ctx)
}
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Token, error) {
	return s.rd().TokenByHash(ctx, hash)
}
func (s *Store) GetToken(ctx context.Context, id string) (domain.Token, error) {
	return s.rd().GetToken(ctx, id)
}
func (s *Store) ListTokens(ctx context.Context, projectID string) ([]domain.Token, error) {
	return s.rd().ListTokens(ctx, projectID)
}
func (s *Store) ListReservations(ctx context.Context) ([]domain.Reservation, error) {
	return s.rd().ListReservations(ctx)
}
func (s *Store) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	return s.rd().GetMachine(ctx, id)
}
func (s *Store) ListMachines(ctx context.Context) ([]domain.Machine, error) {
	return s.rd().ListMachines(ctx)
}
func (s *Store) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	return s.rd().GetCluster(ctx, id)
}
func (s *Store) GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error) {
	return s.rd().GetKubeconfig(ctx, clusterID)
}
func (s *Store) ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error) {
	return s.rd().ListClusters(ctx, projectID)
}
func (s *Store) GetNode(ctx context.Context, id string) (domain.Node, error) {
	return s.rd().GetNode(ctx, id)
}
func (s *Store) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	return s.rd().ListNodes(ctx, f)
}
func (s *Store) GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error) {
	return s.rd().GetClusterRecord(ctx, id)
}
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]domain.UsageRecord, error) {
	return s.rd().ListUsage(ctx, f)
}
func (s *Store) ListPrices(ctx context.Context) ([]domain.Price, error) {
	return s.rd().ListPrices(ctx)
}
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]domain.Event, error) {
	return s.rd().ListEvents(ctx, f)
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanProject(sc scanner) (p domain.Project, err error) {
	err = sc.Scan(&p.ID, timeCol{&p.CreatedAt}, &p.StorageQuota)
	return p, err
}

func scanToken(sc scanner) (t domain.Token, err error) {
	var project sql.NullString // NULL: an operator token
	err = sc.Scan(&t.ID, &t.Hash, &project, &t.Name, timeCol{&t.CreatedAt}, timeCol{&t.ExpiresAt},
		timeCol{&t.RevokedAt}, timeCol{&t.LastUsedAt})
	t.ProjectID = project.String
	return t, err
}

func scanReservation(sc scanner) (r domain.Reservation, err error) {
	err = sc.Scan(&r.ID, &r.ProjectID, &r.Region, &r.GPUType, timeCol{&r.CreatedAt})
	return r, err
}

func scanMachine(sc scanner) (m domain.Machine, err error) {
	err = sc.Scan(&m.ID, &m.Region, &m.GPUType, &m.GPUs, &m.ReservationID, &m.OutOfService,
		timeCol{&m.CooldownUntil}, timeCol{&m.CreatedAt}, &m.Failures, &m.OutOfServiceReason,
		timeCol{&m.MaintenanceAt}, &m.ClaimedBy, timeCol{&m.PreemptAt})
	return m, err
}

func scanCluster(sc scanner) (c domain.Cluster, err error) {
	err = sc.Scan(&c.ID, &c.Name, &c.ProjectID, &c.Region, &c.GPUType, &c.Type, &c.BillingType,
		&c.NumGPUs, &c.DesiredPreemptibleGPUs, &c.Weight, &c.Status, &c.Unfulfilled,
		&c.UnfulfilledMessage, &c.Deleting, &c.NodeSeq, timeCol{&c.CreatedAt}, timeCol{&c.DeletedAt},
		timeCol{&c.UnmetSince}, &c.MaxPreemptibleGPUs, &c.RequestedPreemptibleGPUs, listCol{&c.PreemptibleGPUTypes},
		&c.PreemptibleStrategy, &c.MaxPreemptiblePrice, timeCol{&c.StartsAt}, timeCol{&c.ActiveAt},
		timeCol{&c.KubeAttachedAt}, accessCol{&c.Access})
	return c, err
}

func scanNode(sc scanner) (n domain.Node, err error) {
	err = sc.Scan(&n.ID, &n.ClusterID, &n.MachineID, &n.Name, &n.Class, &n.GPUs, &n.State,
		timeCol{&n.CreatedAt}, timeCol{&n.ReadyAt}, timeCol{&n.DrainStartedAt}, timeCol{&n.Deadline},
		&n.DrainCause, &n.Notified, timeCol{&n.DrainedAt}, &n.Outcome, timeCol{&n.RemovedAt}, &n.LastError,
		&n.CleanupPending, timeCol{&n.ProvisioningAt}, timeCol{&n.ClassSince}, &n.GPUType)
	return n, err
}

func scanEvent(sc scanner) (e domain.Event, err error) {
	err = sc.Scan(&e.Seq, &e.ID, &e.ClusterID, &e.NodeID, &e.NodeName, &e.Reason, &e.Message,
		timeCol{&e.Timestamp}, timeCol{&e.Deadline})
	return e, err
}

// get runs a single-row query; what names the row in errors.
func get[T any](ctx context.Context, r reader, scan func(scanner) (T, error), what, query string, args ...any) (T, error) {
	v, err := scan(r.q.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("get %s: %w", what, domain.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("%s: get %s: %w", r.s.d.Name, what, err)
	}
	return v, nil
}

// list runs a query and scans every row. It returns an empty, non-nil
// slice when nothing matches so that results compare and encode alike.
func list[T any](ctx context.Context, r reader, scan func(scanner) (T, error), what, query string, args ...any) ([]T, error) {
	rows, err := r.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: list %s: %w", r.s.d.Name, what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", r.s.d.Name, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list %s: %w", r.s.d.Name, what, err)
	}
	return out, nil
}

func (r reader) GetProject(ctx context.Context, id string) (domain.Project, error) {
	return get(ctx, r, scanProject, "project "+id, r.s.q.getProject, id)
}

func (r reader) ListProjects(ctx context.Context) ([]domain.Project, error) {
	return list(ctx, r, scanProject, "projects", r.s.q.listProjects)
}

func (r reader) TokenByHash(ctx context.Context, hash string) (domain.Token, error) {
	// The hash is a credential: keep it out of error messages.
	return get(ctx, r, scanToken, "token", r.s.q.tokenByHash, hash)
}

func (r reader) GetToken(ctx context.Context, id string) (domain.Token, error) {
	return get(ctx, r, scanToken, "token "+id, r.s.q.getToken, id)
}

func (r reader) ListTokens(ctx context.Context, projectID string) ([]domain.Token, error) {
	if projectID == "" {
		return list(ctx, r, scanToken, "operator tokens", r.s.q.listOperatorTokens)
	}
	return list(ctx, r, scanToken, "tokens", r.s.q.listTokensOf, projectID)
}

func (r reader) ListReservations(ctx context.Context) ([]domain.Reservation, error) {
	return list(ctx, r, scanReservation, "reservations", r.s.q.listReservations)
}

func (r reader) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	return get(ctx, r, scanMachine, "machine "+id, r.s.q.getMachine, id)
}

func (r reader) ListMachines(ctx context.Context) ([]domain.Machine, error) {
	return list(ctx, r, scanMachine, "machines", r.s.q.listMachines)
}

func (r reader) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	return get(ctx, r, scanCluster, "cluster "+id, r.s.q.getCluster, id)
}

func (r reader) GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error) {
	return get(ctx, r, scanCluster, "cluster "+id, r.s.q.getClusterRecord, id)
}

func (r reader) GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error) {
	// The sealed bytes are a credential: keep them out of error messages.
	scan := func(sc scanner) (b []byte, err error) { return b, sc.Scan(&b) }
	b, err := get(ctx, r, scan, "kubeconfig of cluster "+clusterID, r.s.q.getKubeconfig, clusterID)
	if len(b) == 0 {
		b = nil // NULL: none attached
	}
	return b, err
}

func (r reader) ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error) {
	if projectID == "" {
		return list(ctx, r, scanCluster, "clusters", r.s.q.listClusters)
	}
	return list(ctx, r, scanCluster, "clusters of project "+projectID, r.s.q.listClustersOf, projectID)
}

func (r reader) ListPrices(ctx context.Context) ([]domain.Price, error) {
	return list(ctx, r, scanPrice, "prices", r.s.q.listPrices)
}

func scanUsage(sc scanner) (u domain.UsageRecord, err error) {
	var maxRate int64
	err = sc.Scan(&u.NodeID, &u.NodeName, &u.ClusterID, &u.ClusterName, &u.ProjectID, &u.Region, &u.GPUType,
		&u.Class, &u.BillingType, &u.ReservationID, &u.GPUs, timeCol{&u.Start}, timeCol{&u.End}, &u.Final, &maxRate)
	u.MaxRateMicros = uint64(max(maxRate, 0))
	return u, err
}

func scanPrice(sc scanner) (p domain.Price, err error) {
	err = sc.Scan(&p.ID, &p.Kind, &p.Region, &p.GPUType, &p.ReservationID, &p.Value,
		timeCol{&p.EffectiveFrom}, timeCol{&p.CreatedAt})
	return p, err
}

func (r reader) ListEvents(ctx context.Context, f store.EventFilter) ([]domain.Event, error) {
	q := r.s.q.listEvents
	args := []any{f.AfterSeq}
	if f.ClusterID != "" {
		q += " AND cluster_id = ?"
		args = append(args, f.ClusterID)
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	return list(ctx, r, scanEvent, "events", rebind(r.s.d, q), args...)
}
