// Package store defines the one persistence interface of sparecap. Every
// backend (sqlite, postgres) implements Store and passes the conformance
// suite in package storetest.
//
// The store holds desired state (clusters, targets, fleet) and the observed
// lifecycle (nodes and their reclaim state, events). It never reads a clock
// or makes up identifiers: timestamps and IDs arrive in the values written.
// Writes that belong together go through Update, which runs one transaction.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// MaxText bounds, in bytes, the text columns an outsider fills: a node's
// last error and a webhook delivery's (a cluster's API, a tenant's
// endpoint wrote them), an event's message (built from what a driver
// observed), the detail of a refused permission (the cluster's
// answer). A backend stores longer text cut to it (bound.Text), so no
// answer from outside grows a row by more.
const MaxText = 2048

// Store is implemented by every backend.
type Store interface {
	Reader
	// Update runs fn in one transaction; if fn returns an error nothing it
	// wrote is kept. Updates are serializable: concurrent ones behave as if
	// run one after another. A backend may run fn more than once (to
	// retry a serialization failure), so fn must not act outside tx.
	Update(ctx context.Context, fn func(Tx) error) error
	// Snapshot reads, in one transaction, the state the allocator plans on:
	// all machines and reservations, every cluster not fully deleted and
	// every node not yet removed.
	Snapshot(ctx context.Context) (Snapshot, error)
	Leases
	// TouchTokens records when tokens (by hash) were last used, outside
	// any term (a follower records its uses too): a time older than the
	// stored one changes nothing, and unknown hashes are skipped.
	TouchTokens(ctx context.Context, used map[string]time.Time) error
	Close() error
}

// Leases are the leader lease several servers on one database elect a
// leader with. Lease times are the database's clock, so the servers'
// clocks need not agree. Each new holder starts a term with a larger
// epoch; an Update whose context carries an older epoch (WithEpoch) fails
// with ErrFenced, so a deposed leader cannot commit after a new one took
// over.
type Leases interface {
	// AcquireLease makes holder the leader for ttl if the lease is free,
	// expired or already holder's (a holder restarting after a crash: a
	// holder's name must belong to one process at a time), starting a new
	// term; ok is false (and nothing changed) if another holder's lease is
	// still running.
	AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (l Lease, ok bool, err error)
	// RenewLease extends holder's lease of term epoch by ttl from now; ok is
	// false if that term is over (another holder acquired the lease).
	RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (ok bool, err error)
	// ReleaseLease ends holder's term epoch at once, so another server
	// need not wait for it to expire. Releasing a term that is over does
	// nothing.
	ReleaseLease(ctx context.Context, holder string, epoch int64) error
	// GetLease reads the lease as it is now.
	GetLease(ctx context.Context) (Lease, error)
}

// Lease is the state of the leader lease.
type Lease struct {
	Holder string
	// Address is where the holder serves the API (followers forward
	// writes there).
	Address string
	Epoch   int64
	// Expires and Now are by the database's clock: the lease is held
	// while Now is before Expires.
	Expires, Now time.Time
}

// Held reports whether the lease was held when it was read.
func (l Lease) Held() bool { return l.Holder != "" && l.Now.Before(l.Expires) }

// ErrFenced refuses an Update made for a term that is over (see Leases).
var ErrFenced = errors.New("another server is leader now: this server's term is over")

type epochKey struct{}

// WithEpoch returns a context whose Updates commit only while epoch is the
// current term of the leader lease: checked in the transaction, so a new
// leader's term cannot start between the check and the commit. A negative
// epoch fails every Update with ErrFenced without asking the database
// (a server that is not leader); a context without an epoch is not
// fenced (a single server on SQLite, the writes every replica may make).
func WithEpoch(ctx context.Context, epoch int64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

// WithoutEpoch returns ctx without an epoch: an Update under it is not
// fenced (for writes any server may make, leader or not).
func WithoutEpoch(ctx context.Context) context.Context {
	return context.WithValue(ctx, epochKey{}, nil)
}

// EpochOf returns the epoch WithEpoch put in ctx.
func EpochOf(ctx context.Context) (int64, bool) {
	e, ok := ctx.Value(epochKey{}).(int64)
	return e, ok
}

// Reader are the reads available outside and inside a transaction.
type Reader interface {
	GetProject(ctx context.Context, id string) (domain.Project, error)
	ListProjects(ctx context.Context) ([]domain.Project, error)
	// TokenByHash returns the token with that SHA-256 hash (hex), revoked
	// and expired ones too: the caller decides.
	TokenByHash(ctx context.Context, hash string) (domain.Token, error)
	// GetToken returns the token with that ID.
	GetToken(ctx context.Context, id string) (domain.Token, error)
	// ListTokens lists a project's tokens, or the operator tokens when
	// projectID is "", oldest first, revoked and expired ones too.
	ListTokens(ctx context.Context, projectID string) ([]domain.Token, error)
	ListReservations(ctx context.Context) ([]domain.Reservation, error)
	GetMachine(ctx context.Context, id string) (domain.Machine, error)
	ListMachines(ctx context.Context) ([]domain.Machine, error)
	// GetCluster returns a cluster unless it has been fully deleted
	// (DeletedAt set), in which case it returns domain.ErrNotFound.
	GetCluster(ctx context.Context, id string) (domain.Cluster, error)
	// GetClusterRecord returns a cluster even after it was fully deleted,
	// for the records that outlive it (usage, statistics).
	GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error)
	// ListClusters lists clusters not fully deleted, of one project or of
	// all projects when projectID is empty, oldest first.
	ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error)
	// GetKubeconfig returns the sealed kubeconfig attached to a cluster
	// (see Tx.SetKubeconfig), or nil, nil when none is attached;
	// domain.ErrNotFound if the cluster does not exist or is fully
	// deleted. It is the only read that returns the sealed bytes: they
	// are never part of a domain.Cluster.
	GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error)
	GetNode(ctx context.Context, id string) (domain.Node, error)
	ListNodes(ctx context.Context, f NodeFilter) ([]domain.Node, error)
	// ListEvents returns events with Seq > f.AfterSeq in Seq order.
	ListEvents(ctx context.Context, f EventFilter) ([]domain.Event, error)
	// ListUsage returns usage records overlapping [f.From, f.To), ordered
	// by Start then NodeID.
	ListUsage(ctx context.Context, f UsageFilter) ([]domain.UsageRecord, error)
	// ScanUsage calls fn with the records ListUsage would return, in the
	// same order, as they are read: a period's records are never all in
	// memory. It stops at fn's first error and returns it. fn must not use
	// the store (a backend may hold a connection for the whole scan).
	ScanUsage(ctx context.Context, f UsageFilter, fn func(domain.UsageRecord) error) error
	// ListPrices returns the whole price book, by EffectiveFrom then ID.
	ListPrices(ctx context.Context) ([]domain.Price, error)
	WebhookReader
	// ListLostWork lists the lost-work ledger's entries matching f,
	// oldest notice first.
	ListLostWork(ctx context.Context, f LostWorkFilter) ([]domain.LostWork, error)
	// ScanWorkSpans calls fn with the work spans matching f, in no
	// particular order, as they are read (like ScanUsage: fn must not use
	// the store).
	ScanWorkSpans(ctx context.Context, f WorkSpanFilter, fn func(domain.WorkSpan) error) error
	// ListBudgets lists a project's budgets (every project's with ""),
	// by project then name.
	ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error)
	// ListBudgetAlerts lists the alerts matching f, in f's order.
	ListBudgetAlerts(ctx context.Context, f BudgetAlertFilter) ([]domain.BudgetAlert, error)
	RollupReader
	StorageReader
}

// BulkReader reads many rows by ID in few queries (a round trip to a
// database across a network each, not one a row). Every Tx has it. Rows come in no particular order, and an ID with no row (a cluster
// fully deleted, see GetCluster) is left out.
type BulkReader interface {
	NodesByID(ctx context.Context, ids []string) ([]domain.Node, error)
	ClustersByID(ctx context.Context, ids []string) ([]domain.Cluster, error)
	MachinesByID(ctx context.Context, ids []string) ([]domain.Machine, error)
}

// BulkWriter writes many rows in few statements. Every Tx has it.
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

// Tx is a transaction: reads see its own writes.
type Tx interface {
	Reader
	BulkReader
	BulkWriter
	WebhookWriter
	RollupWriter
	StorageWriter
	RetentionWriter
	// AddLostWork writes entries of the lost-work ledger; an entry of a
	// node that has one is left as it was (a node is drained once).
	AddLostWork(ctx context.Context, ws []domain.LostWork) error
	// SaveLostWork records that a drained node's work reported a
	// checkpoint at at, after its notice (LostWork.SavedAt); an entry with
	// one already, or no entry, is left as it was.
	SaveLostWork(ctx context.Context, nodeID string, at time.Time) error
	// AddWorkSpans writes spans that started (ID is not read); one of a
	// node, key and start already written is left as it was.
	AddWorkSpans(ctx context.Context, ws []domain.WorkSpan) error
	// EndWorkSpans sets the End of each span of its node and key that is
	// still open (one not open is left as it was).
	EndWorkSpans(ctx context.Context, ws []domain.WorkSpan) error
	// SetWorkProgress sets the Progress of each open span of its node and
	// key (one not open is left as it was).
	SetWorkProgress(ctx context.Context, ws []domain.WorkSpan) error
	// CreateBudget returns domain.ErrConflict when the ID or the name in
	// its project is taken, domain.ErrNotFound without the project.
	CreateBudget(ctx context.Context, b domain.Budget) error
	// DeleteBudget deletes a budget (its alerts stay); domain.ErrNotFound
	// if absent.
	DeleteBudget(ctx context.Context, id string) error
	// PruneBudgetAlerts deletes up to limit of the oldest alerts raised
	// before t (the retention's slice), returning how many went.
	PruneBudgetAlerts(ctx context.Context, before time.Time, limit int) (int, error)
	// AddBudgetAlerts writes alerts; one whose project, budget name, key
	// and month are written already is left as it was (an alert is raised
	// once, whatever the budget's ID).
	AddBudgetAlerts(ctx context.Context, as []domain.BudgetAlert) error
	// Create* return domain.ErrConflict when the ID is taken (the Tx stays
	// usable; for a node, also when its machine already has a live node in
	// the same stage: see UpdateNode) and domain.ErrNotFound when a row the value refers to (its
	// project, cluster or machine) does not exist.
	CreateProject(ctx context.Context, p domain.Project) error
	CreateToken(ctx context.Context, t domain.Token) error
	// UpdateToken writes a token's name, expiry and revocation.
	UpdateToken(ctx context.Context, t domain.Token) error
	// DeleteToken deletes a token (a revoked or expired one the API no
	// longer keeps); domain.ErrNotFound if absent.
	DeleteToken(ctx context.Context, id string) error
	CreateReservation(ctx context.Context, r domain.Reservation) error
	CreateMachine(ctx context.Context, m domain.Machine) error
	CreateCluster(ctx context.Context, c domain.Cluster) error
	CreateNode(ctx context.Context, n domain.Node) error
	// Update* write every field of the row; domain.ErrNotFound if absent.
	// The schema allows a machine at most one node provisioning, ready,
	// draining or removing, and at most one pending: a node write that
	// would break that fails with domain.ErrConflict (and, on PostgreSQL,
	// ends the transaction), whatever the caller believed.
	// The exceptions are Cluster.KubeAttachedAt, which CreateCluster and
	// UpdateCluster neither write nor clear: only SetKubeconfig changes
	// it, together with the kubeconfig, so the two always agree; and
	// Cluster.Access, which only SetAccess writes. An
	// UpdateCluster that sets DeletedAt drops the cluster's kubeconfig
	// (and zeroes KubeAttachedAt): credentials do not outlive a cluster.
	UpdateMachine(ctx context.Context, m domain.Machine) error
	UpdateCluster(ctx context.Context, c domain.Cluster) error
	UpdateNode(ctx context.Context, n domain.Node) error
	// SetKubeconfig attaches sealed (a kubeconfig sealed by package
	// secret; the store keeps it as given) to a cluster and sets its
	// KubeAttachedAt to at, replacing any kubeconfig it had. A nil or
	// empty sealed detaches: the kubeconfig is removed and
	// KubeAttachedAt zeroed (detaching a cluster with none attached is
	// not an error). domain.ErrNotFound if the cluster does not exist or
	// is fully deleted; attaching with a zero at is an error.
	SetKubeconfig(ctx context.Context, clusterID string, sealed []byte, at time.Time) error
	// SetAccess records what sparecap learned of the permissions the
	// cluster's attached API grants it (Cluster.Access), replacing what it
	// had. CreateCluster and UpdateCluster neither write nor clear it;
	// SetKubeconfig clears it (a new kubeconfig is a new identity), and so
	// does a cluster's full deletion. domain.ErrNotFound if the cluster
	// does not exist or is fully deleted.
	SetAccess(ctx context.Context, clusterID string, a domain.Access) error
	// AddEvent stores e and returns it with its Seq. Events are
	// de-duplicated by (ClusterID, NodeID, Reason): an event with the same
	// key replaces the earlier one and gets a new Seq.
	AddEvent(ctx context.Context, e domain.Event) (domain.Event, error)
	// PruneEvents deletes events with Timestamp before t.
	PruneEvents(ctx context.Context, before time.Time) (int, error)
	// ArchiveNodes moves up to limit removed nodes out of the live
	// tables, oldest removal first, and returns how many it moved: those
	// removed before removedBefore (a zero RemovedAt counts as before any
	// time), with nothing left to meter (never ready, or their final usage
	// record written) and no cleanup pending. Archived nodes are still
	// found by GetNode and by ListNodes with IncludeRemoved (or States
	// naming removed), never by the live-state reads; their IDs stay
	// taken. Usage records are never moved or deleted.
	ArchiveNodes(ctx context.Context, removedBefore time.Time, limit int) (int, error)
	// PutUsage writes a node's usage record, replacing the one it had:
	// the meter recomputes records from the lifecycle, so writing the
	// same record twice is harmless. A final record is never replaced, and
	// a running one only by a final one or one reaching further, so a cut
	// computed from an older read cannot shorten a bill.
	PutUsage(ctx context.Context, u domain.UsageRecord) error
	// CreatePrice adds a price book entry (domain.ErrConflict if the ID is
	// taken).
	CreatePrice(ctx context.Context, p domain.Price) error
}

// NodeFilter selects nodes. Zero values select everything.
type NodeFilter struct {
	ClusterID string
	// ClusterIDs, when not empty, selects nodes of these clusters only.
	ClusterIDs []string
	MachineID  string
	// States, when not empty, selects nodes in one of these states.
	States []domain.NodeState
	// IncludeRemoved selects removed nodes too (ignored when States is set).
	IncludeRemoved bool
	// Class, when set, selects nodes of this compute class only.
	Class domain.ComputeClass
	// RemovedSince, when set, leaves out the nodes removed before it: a
	// read of the past from then on (statistics, forecasts) skips the rest
	// of the history kept.
	RemovedSince time.Time
	// Unmetered selects, removed or not, the nodes that became ready and
	// have no final usage record yet: the meter's work list.
	Unmetered bool
	// UnmeteredStopped selects the Unmetered nodes that are no longer
	// ready (draining, removing, removed): the meter's work list on the
	// leader, which reads the ready ones (none of which has a final
	// record) from its in-memory copy.
	UnmeteredStopped bool
	// CleanupPending selects only nodes whose objects in the tenant's
	// cluster are still to be deleted (with IncludeRemoved, removed ones
	// too: the cleanup work list).
	CleanupPending bool
}

// UsageFilter selects usage records. Zero values select everything.
type UsageFilter struct {
	ProjectID string
	ClusterID string
	// From and To bound the records' [Start, End) from both sides.
	From, To time.Time
	// Open selects only records not final yet (running nodes).
	Open bool
}

// LostWorkFilter selects lost-work entries: of a project or cluster
// (empty: all), noticed in [From, To) (zero: unbounded).
type LostWorkFilter struct {
	ProjectID, ClusterID string
	From, To             time.Time
}

// WorkSpanFilter selects work spans: of a project or cluster (empty: all),
// overlapping [From, To) (zero: unbounded; an open span reaches every
// later time), or only the open ones.
type WorkSpanFilter struct {
	ProjectID, ClusterID string
	From, To             time.Time
	Open                 bool
	// Only, when set, reads no more of each span than a split by one
	// field needs: its cluster, node, key, GPUs, start, end and progress,
	// and the field:
	// "namespace", "job", "account" or "label:<key>" (Labels then holds
	// that label alone, when the span has it). A fleet's month is
	// hundreds of thousands of spans: every column read costs.
	Only string
}

// TableSize is one table's rows and bytes on disk, its indexes included.
type TableSize struct {
	Table       string
	Rows, Bytes int64
}

// Sizer is a store that says how big its tables are (the SQL backends:
// SQLite counts by walking its pages, PostgreSQL gives its planner's row
// estimate, so run it seldom).
type Sizer interface {
	TableSizes(ctx context.Context) ([]TableSize, error)
}

// BudgetAlertFilter selects budget alerts: of a project, a budget, a
// budget name and a month ("2026-11") when set; after AfterSeq and before
// BeforeSeq when above 0; oldest first, or newest first with Newest; at
// most Limit (0: all).
type BudgetAlertFilter struct {
	ProjectID, BudgetID, Name, Month string
	AfterSeq, BeforeSeq              int64
	Newest                           bool
	Limit                            int
}

// EventFilter selects events. Zero values select everything.
type EventFilter struct {
	ClusterID string
	AfterSeq  int64
	// Limit caps the result; 0 means no limit.
	Limit int
}

// Snapshot is a consistent read of the state the allocator works on.
type Snapshot struct {
	Machines     []domain.Machine
	Reservations []domain.Reservation
	Clusters     []domain.Cluster
	// Nodes not removed. Pointers, so that the leader's in-memory copy
	// (Cached) replaces a written node's pointer rather than copying every
	// node on every commit; what they point to is never modified.
	Nodes []*domain.Node
}

// Pointers returns pointers to the elements of rows (which stay in one
// allocation, for the allocator's scans).
func Pointers[T any](rows []T) []*T {
	out := make([]*T, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out
}

// Values returns copies of what ptrs point to.
func Values[T any](ptrs []*T) []T {
	out := make([]T, len(ptrs))
	for i, p := range ptrs {
		out[i] = *p
	}
	return out
}
