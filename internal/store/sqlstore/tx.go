package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// tx implements store.Tx; its reads go through the transaction and so see
// its writes.
type tx struct {
	reader
	// eventLocked: this transaction holds the dialect's EventLock (held
	// to its end, so taken once).
	eventLocked bool
}

// create runs an INSERT … ON CONFLICT DO NOTHING and turns "no row
// inserted" into ErrConflict.
func (t *tx) create(ctx context.Context, what, query string, args ...any) error {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return t.writeErr("create "+what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: create %s: %w", t.s.d.Name, what, err)
	}
	if n == 0 {
		return fmt.Errorf("create %s: %w", what, domain.ErrConflict)
	}
	return nil
}

// update runs an UPDATE by ID and turns "no row updated" into ErrNotFound.
func (t *tx) update(ctx context.Context, what, query string, args ...any) error {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return t.writeErr("update "+what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: update %s: %w", t.s.d.Name, what, err)
	}
	if n == 0 {
		return fmt.Errorf("update %s: %w", what, domain.ErrNotFound)
	}
	return nil
}

// writeErr maps a missing referenced row (a node's cluster, a cluster's
// project, …) to ErrNotFound, the error callers already branch on.
func (t *tx) writeErr(doing string, err error) error {
	if t.s.d.ForeignKeyViolation != nil && t.s.d.ForeignKeyViolation(err) {
		return fmt.Errorf("%s: referenced row %w (%v)", doing, domain.ErrNotFound, err)
	}
	if t.s.d.UniqueViolation != nil && t.s.d.UniqueViolation(err) {
		return fmt.Errorf("%s: %w: the machine already has a live node (%v)", doing, domain.ErrConflict, err)
	}
	return fmt.Errorf("%s: %s: %w", t.s.d.Name, doing, err)
}

func (t *tx) CreateProject(ctx context.Context, p domain.Project) error {
	return t.create(ctx, "project "+p.ID, t.s.q.createProject, p.ID, t.s.timeArg(p.CreatedAt), max(p.StorageQuota, 0))
}

func (t *tx) CreateToken(ctx context.Context, tok domain.Token) error {
	var project any // NULL: an operator token
	if tok.ProjectID != "" {
		project = tok.ProjectID
	}
	// The hash is a credential: "token "+ID names it in errors.
	return t.create(ctx, "token "+tok.ID, t.s.q.createToken, tok.ID, tok.Hash, project, tok.Name,
		t.s.timeArg(tok.CreatedAt), t.s.timeArg(tok.ExpiresAt), t.s.timeArg(tok.RevokedAt), t.s.timeArg(tok.LastUsedAt))
}

func (t *tx) UpdateToken(ctx context.Context, tok domain.Token) error {
	return t.update(ctx, "token "+tok.ID, t.s.q.updateToken, tok.Name, t.s.timeArg(tok.ExpiresAt), t.s.timeArg(tok.RevokedAt), tok.ID)
}

func (t *tx) DeleteToken(ctx context.Context, id string) error {
	return t.update(ctx, "token "+id, t.s.q.deleteToken, id)
}

func (t *tx) CreateReservation(ctx context.Context, r domain.Reservation) error {
	return t.create(ctx, "reservation "+r.ID, t.s.q.createReservation,
		r.ID, r.ProjectID, r.Region, r.GPUType, t.s.timeArg(r.CreatedAt))
}

func (t *tx) CreateMachine(ctx context.Context, m domain.Machine) error {
	return t.create(ctx, "machine "+m.ID, t.s.q.createMachine,
		m.ID, m.Region, m.GPUType, m.GPUs, m.ReservationID, m.OutOfService,
		t.s.timeArg(m.CooldownUntil), t.s.timeArg(m.CreatedAt), m.Failures, m.OutOfServiceReason,
		t.s.timeArg(m.MaintenanceAt), m.ClaimedBy, t.s.timeArg(m.PreemptAt))
}

func (t *tx) UpdateMachine(ctx context.Context, m domain.Machine) error {
	return t.update(ctx, "machine "+m.ID, t.s.q.updateMachine,
		m.Region, m.GPUType, m.GPUs, m.ReservationID, m.OutOfService,
		t.s.timeArg(m.CooldownUntil), t.s.timeArg(m.CreatedAt), m.Failures, m.OutOfServiceReason,
		t.s.timeArg(m.MaintenanceAt), m.ClaimedBy, t.s.timeArg(m.PreemptAt), m.ID)
}

func (t *tx) CreateCluster(ctx context.Context, c domain.Cluster) error {
	return t.create(ctx, "cluster "+c.ID, t.s.q.createCluster, t.newClusterArgs(c)...)
}

// newClusterArgs are c's values for clusterWriteCols.
func (t *tx) newClusterArgs(c domain.Cluster) []any {
	return []any{c.ID, c.Name, c.ProjectID, c.Region, c.GPUType, string(c.Type), string(c.BillingType),
		c.NumGPUs, c.DesiredPreemptibleGPUs, c.Weight, string(c.Status), string(c.Unfulfilled),
		c.UnfulfilledMessage, c.Deleting, c.NodeSeq, t.s.timeArg(c.CreatedAt), t.s.timeArg(c.DeletedAt),
		t.s.timeArg(c.UnmetSince), c.MaxPreemptibleGPUs, c.RequestedPreemptibleGPUs,
		text(strings.Join(c.PreemptibleGPUTypes, ",")), text(c.PreemptibleStrategy), text(c.MaxPreemptiblePrice),
		t.s.timeArg(c.StartsAt), t.s.timeArg(c.ActiveAt)}
}

func (t *tx) UpdateCluster(ctx context.Context, c domain.Cluster) error {
	if err := t.update(ctx, "cluster "+c.ID, t.s.q.updateCluster, t.clusterSetArgs(c)...); err != nil {
		return err
	}
	return t.dropKubeconfig(ctx, c)
}

// clusterSetArgs are c's values for clusterSet, then its ID.
func (t *tx) clusterSetArgs(c domain.Cluster) []any {
	return []any{c.Name, c.ProjectID, c.Region, c.GPUType, string(c.Type), string(c.BillingType),
		c.NumGPUs, c.DesiredPreemptibleGPUs, c.Weight, string(c.Status), string(c.Unfulfilled),
		c.UnfulfilledMessage, c.Deleting, c.NodeSeq, t.s.timeArg(c.CreatedAt), t.s.timeArg(c.DeletedAt),
		t.s.timeArg(c.UnmetSince), c.MaxPreemptibleGPUs, c.RequestedPreemptibleGPUs,
		text(strings.Join(c.PreemptibleGPUTypes, ",")), text(c.PreemptibleStrategy), text(c.MaxPreemptiblePrice),
		t.s.timeArg(c.StartsAt), t.s.timeArg(c.ActiveAt), c.ID}
}

// dropKubeconfig drops the kubeconfig of c, just written, if it is fully
// deleted: credentials do not outlive a cluster.
func (t *tx) dropKubeconfig(ctx context.Context, c domain.Cluster) error {
	if c.DeletedAt.IsZero() {
		return nil
	}
	if _, err := t.q.ExecContext(ctx, t.s.q.dropKubeconfig, c.ID); err != nil {
		return fmt.Errorf("%s: update cluster %s: drop kubeconfig: %w", t.s.d.Name, c.ID, err)
	}
	return nil
}

func (t *tx) SetKubeconfig(ctx context.Context, clusterID string, sealed []byte, at time.Time) error {
	if len(sealed) == 0 {
		return t.update(ctx, "kubeconfig of cluster "+clusterID, t.s.q.setKubeconfig, nil, nil, clusterID)
	}
	if at.IsZero() {
		return fmt.Errorf("set kubeconfig of cluster %s: the attach time is zero", clusterID)
	}
	return t.update(ctx, "kubeconfig of cluster "+clusterID, t.s.q.setKubeconfig, sealed, t.s.timeArg(at), clusterID)
}

func (t *tx) SetAccess(ctx context.Context, clusterID string, a domain.Access) error {
	text, err := encodeAccess(a)
	if err != nil {
		return fmt.Errorf("set access of cluster %s: %w", clusterID, err)
	}
	return t.update(ctx, "access of cluster "+clusterID, t.s.q.setAccess, text, clusterID)
}

func (t *tx) CreateNode(ctx context.Context, n domain.Node) error {
	// An archived node's ID stays taken (see ArchiveNodes).
	if archived, err := t.nodeArchived(ctx, n.ID); err != nil || archived {
		if err == nil {
			err = fmt.Errorf("create node %s: %w", n.ID, domain.ErrConflict)
		}
		return err
	}
	return t.create(ctx, "node "+n.ID, t.s.q.createNode, t.newNodeArgs(n)...)
}

// newNodeArgs are n's values for a row of nodeRow.
func (t *tx) newNodeArgs(n domain.Node) []any {
	return []any{n.ID, n.ClusterID, n.MachineID, n.Name, string(n.Class), n.GPUs, string(n.State),
		t.s.timeArg(n.CreatedAt), t.s.timeArg(n.ReadyAt), t.s.timeArg(n.DrainStartedAt),
		t.s.timeArg(n.Deadline), string(n.DrainCause), n.Notified, t.s.timeArg(n.DrainedAt),
		string(n.Outcome), t.s.timeArg(n.RemovedAt), text(n.LastError), n.CleanupPending, t.s.timeArg(n.ProvisioningAt),
		t.s.timeArg(n.ClassSince), text(n.GPUType), n.ID, t.s.timeArg(n.PeriodStart())}
}

func (t *tx) UpdateNode(ctx context.Context, n domain.Node) error {
	return t.update(ctx, "node "+n.ID, t.s.q.updateNode, t.nodeSetArgs(n)...)
}

// nodeSetArgs are n's values for nodeSet, then its ID.
func (t *tx) nodeSetArgs(n domain.Node) []any {
	return []any{n.ClusterID, n.MachineID, n.Name, string(n.Class), n.GPUs, string(n.State),
		t.s.timeArg(n.CreatedAt), t.s.timeArg(n.ReadyAt), t.s.timeArg(n.DrainStartedAt),
		t.s.timeArg(n.Deadline), string(n.DrainCause), n.Notified, t.s.timeArg(n.DrainedAt),
		string(n.Outcome), t.s.timeArg(n.RemovedAt), text(n.LastError), n.CleanupPending, t.s.timeArg(n.ProvisioningAt),
		t.s.timeArg(n.ClassSince), text(n.GPUType), n.ID}
}

// lockEvents takes the event lock, once per transaction.
func (t *tx) lockEvents(ctx context.Context) error {
	if t.s.q.eventLock != "" && !t.eventLocked {
		if _, err := t.q.ExecContext(ctx, t.s.q.eventLock); err != nil {
			return fmt.Errorf("%s: add event: lock: %w", t.s.d.Name, err)
		}
		t.eventLocked = true
	}
	return nil
}

func (t *tx) eventArgs(e domain.Event) []any {
	return []any{e.ID, e.ClusterID, e.NodeID, e.NodeName, string(e.Reason), text(e.Message),
		t.s.timeArg(e.Timestamp), t.s.timeArg(e.Deadline)}
}

func (t *tx) AddEvent(ctx context.Context, e domain.Event) (domain.Event, error) {
	if err := t.lockEvents(ctx); err != nil {
		return e, err
	}
	if t.s.q.replaceEvent == "" {
		return e, fmt.Errorf("%s: add event: the dialect sets neither UpsertDefault nor InsertOrReplace", t.s.d.Name)
	}
	if err := t.q.QueryRowContext(ctx, t.s.q.replaceEvent, t.eventArgs(e)...).Scan(&e.Seq); err != nil {
		return e, t.writeErr("add event", err)
	}
	// Hand back what a later read returns.
	e.Timestamp = readBack(e.Timestamp)
	e.Deadline = readBack(e.Deadline)
	return e, nil
}

func (t *tx) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil // nothing is before the zero time
	}
	res, err := t.q.ExecContext(ctx, t.s.q.pruneEvents, t.s.timeArg(before))
	if err != nil {
		return 0, fmt.Errorf("%s: prune events: %w", t.s.d.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: prune events: %w", t.s.d.Name, err)
	}
	return int(n), nil
}

func (t *tx) PutUsage(ctx context.Context, u domain.UsageRecord) error {
	_, err := t.q.ExecContext(ctx, t.s.q.putUsage, t.usageArgs(u)...)
	if err != nil {
		return t.writeErr("put usage of node "+u.NodeID, err)
	}
	if u.Final {
		if err := t.markMetered(ctx, u); err != nil {
			return err
		}
	}
	return t.late(ctx, lateUsage(nil, u))
}

// lateUsage adds u to rows: a record ending before the rollup mark
// changes its months from its start (a final cut that came after its
// month was rolled; the roller rolls no month an open record has not
// passed, so a record reaching past the mark changes none).
func lateUsage(rows []lateRow, u domain.UsageRecord) []lateRow {
	if u.End.IsZero() {
		return rows
	}
	return append(rows, lateRow{u.ProjectID, u.ClusterID, u.Start, u.End})
}

// usageArgs are u's values in the order of usageCols.
func (t *tx) usageArgs(u domain.UsageRecord) []any {
	return []any{u.NodeID, u.NodeName, u.ClusterID, u.ClusterName, u.ProjectID, u.Region, u.GPUType,
		string(u.Class), string(u.BillingType), u.ReservationID, u.GPUs,
		t.s.timeArg(u.Start), t.s.timeArg(u.End), u.Final, int64(u.MaxRateMicros)}
}

// CreatePrice marks dirty every rolled month from the price's start: a
// price of the past reprices them.
func (t *tx) CreatePrice(ctx context.Context, p domain.Price) error {
	if err := t.create(ctx, "price "+p.ID, t.s.q.createPrice,
		p.ID, string(p.Kind), p.Region, p.GPUType, p.ReservationID, p.Value,
		t.s.timeArg(p.EffectiveFrom), t.s.timeArg(p.CreatedAt)); err != nil {
		return err
	}
	q := rebind(t.s.d, `INSERT INTO rollup_dirty (month, project_id, cluster_id)
		SELECT DISTINCT month, project_id, cluster_id FROM rollups WHERE month >= ? AND cluster_id <> '' ON CONFLICT DO NOTHING`)
	if _, err := t.q.ExecContext(ctx, q, t.s.timeArg(store.MonthOf(p.EffectiveFrom))); err != nil {
		return fmt.Errorf("%s: price %s: mark rolled months dirty: %w", t.s.d.Name, p.ID, err)
	}
	return nil
}

// readBack is t as the store returns it after writing it.
func readBack(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Microsecond).UTC()
}

// text is s as stored in a column an outsider fills: cut to
// store.MaxText bytes.
func text(s string) string { return bound.Text(s, store.MaxText) }
