// Package domain holds the types every other package speaks: machines of the
// fleet, clusters, their nodes and the lifecycle events posted about them.
// It has no behaviour beyond small helpers and validation of enum values.
package domain

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Label, taint and annotation keys put on Kubernetes nodes.
const (
	LabelComputeClass = "sparecap.dev/compute-class"
	// LabelNodeID names the sparecap node a Node object stands for, and
	// marks a Node as sparecap's. No label names the machine: its ID may
	// name the reservation's owner, which a borrower must not learn.
	LabelNodeID = "sparecap.dev/node-id"
	// LabelGPUType names the node's GPU type (its machine's, as the
	// fleet names it): GPU Feature Discovery owns the nvidia.com/ labels.
	LabelGPUType = "sparecap.dev/gpu-type"
	// ReasonDisruption is the reason of the DisruptionTarget condition
	// sparecap sets itself on a pod it deletes directly for a reclaim
	// (its eviction was refused); ReasonEviction, Kubernetes' own, is the
	// reason the Eviction API sets, which is how most pods get their
	// notice. Either marks the pod as disrupted by the reclaim.
	ReasonDisruption = "PreemptionBySparecap"
	ReasonEviction   = "EvictionByEvictionAPI"
	// LabelKueueWorkload is put on the pods of a Kueue workload admitted
	// through sparecap's admission check (its podSetUpdates): the
	// workload's UID, so a reclaimed node's pods lead to their workloads.
	LabelKueueWorkload = "sparecap.dev/kueue-workload"
	TaintPreempted     = "sparecap.dev/preempted"
	AnnotationDeadline = "sparecap.dev/preempt-deadline"
	// AnnotationPreemptAt: when the node's notice will come, its machine
	// being booked (RFC 3339), on a Kubernetes node and its pods, hours
	// or days ahead; gone if the booking moves away or is cancelled.
	AnnotationPreemptAt   = "sparecap.dev/preempt-at"
	DefaultGPUsPerMachine = 8
	// GPUStep is the unit every GPU count in a request must be a multiple of.
	GPUStep = 8
	// DefaultDrainWindow is the bounded notice a preempted node gets.
	DefaultDrainWindow = 5 * time.Minute
	// DefaultEventRetention is how long lifecycle events are kept.
	DefaultEventRetention = 72 * time.Hour
	// DefaultAlertRetention is how long budget alerts are kept: 400 days,
	// so a month's alerts are there a year later, beside last year's.
	DefaultAlertRetention = 400 * 24 * time.Hour
	// DefaultUsageRetention is how long raw usage records are kept once
	// their months are rolled up: per-node and per-day answers reach back
	// this far (the current month and the two before it whole).
	DefaultUsageRetention = 100 * 24 * time.Hour
	// DefaultSpanRetention is how long raw work spans are kept once their
	// months are rolled up: a budget's month, splits by job or unit of
	// work, and periods not made of whole months reach back this far.
	DefaultSpanRetention = 40 * 24 * time.Hour
	// DefaultHistoryRetention is how long the lost-work ledger and the
	// history of removed nodes are kept: 400 days, so last year's same
	// month is there (the 7- and 28-day statistics and the hour-of-week
	// history read far less).
	DefaultHistoryRetention = 400 * 24 * time.Hour
	// MinRawRetention is the least of both: a budget reads its whole
	// month.
	MinRawRetention = 32 * 24 * time.Hour
)

// ComputeClass is the class a node serves its cluster in. A node changes
// class only when its tenant converts it in place (Node.ClassSince).
type ComputeClass string

const (
	Standard    ComputeClass = "standard"
	Preemptible ComputeClass = "preemptible"
)

// NodeNamePrefix returns the prefix node names of the class carry.
func (c ComputeClass) NodeNamePrefix() string {
	if c == Preemptible {
		return "gpu-preemptible-dp-"
	}
	return "gpu-dp-"
}

// NodeName is the Kubernetes node name of the n-th node of a cluster.
func NodeName(c ComputeClass, n int64) string {
	return fmt.Sprintf("%s%d", c.NodeNamePrefix(), n)
}

// NodeState is the lifecycle state of a node. The reclaim state machine is
// Draining → Removing → Removed; the deadline is stored when Draining starts.
type NodeState string

const (
	// NodePending: the node is bound to a machine that is still draining
	// another node; it starts provisioning once that machine is wiped.
	NodePending      NodeState = "pending"
	NodeProvisioning NodeState = "provisioning"
	NodeReady        NodeState = "ready"
	NodeDraining     NodeState = "draining"
	NodeRemoving     NodeState = "removing"
	NodeRemoved      NodeState = "removed"
)

// ActiveStates are the states in which a node is active: it occupies its
// machine (a pending node only holds a claim on it). The schema allows a
// machine one active node at a time.
var ActiveStates = []NodeState{NodeProvisioning, NodeReady, NodeDraining, NodeRemoving}

// Active reports whether a node in state s occupies its machine (see
// ActiveStates).
func (s NodeState) Active() bool {
	return s == NodeProvisioning || s == NodeReady || s == NodeDraining || s == NodeRemoving
}

// Live reports whether the node counts toward its cluster's capacity: it is
// coming up or serving, not on its way out.
func (s NodeState) Live() bool {
	return s == NodePending || s == NodeProvisioning || s == NodeReady
}

// DrainCause says why a node is being drained. It decides the billing stop
// point and the event wording.
type DrainCause string

const (
	// CausePreempted: capacity is needed for standard demand elsewhere.
	CausePreempted DrainCause = "preempted"
	// CauseFairShare: spare capacity is rebalanced to a cluster below its share.
	CauseFairShare DrainCause = "fair_share"
	// CauseScaledDown: the tenant lowered its target or standard count.
	CauseScaledDown DrainCause = "scaled_down"
	// CauseClusterDeleted: the tenant deleted the cluster.
	CauseClusterDeleted DrainCause = "cluster_deleted"
	// CauseOutOfService: the operator took the machine out of service.
	CauseOutOfService DrainCause = "out_of_service"
)

// TenantInitiated reports whether the tenant asked for the drain.
func (c DrainCause) TenantInitiated() bool {
	return c == CauseScaledDown || c == CauseClusterDeleted
}

// DrainOutcome records how a drain ended.
type DrainOutcome string

const (
	OutcomeEarly    DrainOutcome = "early"    // all pods exited before the deadline
	OutcomeDeadline DrainOutcome = "deadline" // removed at the deadline
	// OutcomeLost: the node was lost without a drain: its Node object was
	// deleted by someone else, or it stayed NotReady too long.
	OutcomeLost DrainOutcome = "lost"
)

// MachineState is derived from the machine's active node (if any).
type MachineState string

const (
	MachineFree         MachineState = "free"
	MachineProvisioning MachineState = "provisioning"
	MachineReady        MachineState = "ready"
	MachineDraining     MachineState = "draining"
	MachineRemoving     MachineState = "removing"
	MachineOutOfService MachineState = "out_of_service"
)

// ClusterType is the platform a cluster's nodes join: Kubernetes or
// Slurm. It is fixed at creation.
type ClusterType string

const (
	ClusterKubernetes ClusterType = "KUBERNETES"
	ClusterSlurm      ClusterType = "SLURM"
)

// BillingType decides which pool standard nodes draw from.
type BillingType string

const (
	BillingOnDemand BillingType = "ON_DEMAND"
	BillingReserved BillingType = "RESERVED"
)

// ClusterStatus as reported by the API.
type ClusterStatus string

const (
	StatusWaiting  ClusterStatus = "WaitingForDataPlaneNodes"
	StatusReady    ClusterStatus = "Ready"
	StatusDegraded ClusterStatus = "Degraded"
	StatusDeleting ClusterStatus = "Deleting"
	// StatusScheduled: booked ahead; its nodes are not planned yet.
	StatusScheduled ClusterStatus = "Scheduled"
)

// UnfulfilledReason explains why allocated < desired preemptible GPUs.
type UnfulfilledReason string

const (
	UnfulfilledNone        UnfulfilledReason = ""
	UnfulfilledNoCapacity  UnfulfilledReason = "NoSpareCapacity"
	UnfulfilledFairShare   UnfulfilledReason = "FairShare"
	UnfulfilledCoolingDown UnfulfilledReason = "CoolingDown"
	// UnfulfilledProvisioning: capacity is found, nodes are coming up.
	UnfulfilledProvisioning UnfulfilledReason = "Provisioning"
)

// EventReason of a node lifecycle event.
type EventReason string

const (
	ReasonNodeAdded          EventReason = "NodeAdded"
	ReasonPreemptionNotified EventReason = "PreemptionNotified"
	ReasonNodeDrained        EventReason = "NodeDrained"
	ReasonNodeRemoved        EventReason = "NodeRemoved"
	ReasonScaledDown         EventReason = "ScaledDown"
	ReasonTargetUnfulfilled  EventReason = "TargetUnfulfilled"
	ReasonTargetFulfilled    EventReason = "TargetFulfilled"
	ReasonClusterDeleting    EventReason = "ClusterDeleting"
	// ReasonProvisionFailed / ReasonDeprovisionFailed: the machine
	// provider (an operator's exec hook, say) failed; the step is retried
	// with backoff and the error is kept on the node (Node.LastError).
	ReasonProvisionFailed   EventReason = "ProvisionFailed"
	ReasonDeprovisionFailed EventReason = "DeprovisionFailed"
	// ReasonNodeLost: a ready node's Node object was deleted by someone
	// else, or it was NotReady longer than the lost-after time; billing
	// stops then and the machine is taken back.
	ReasonNodeLost EventReason = "NodeLost"
	// ReasonRegistrationFailed: a machine's node did not register Ready
	// within the registration timeout; the machine goes back (out of
	// service after repeated failures) and the node is replaced.
	ReasonRegistrationFailed EventReason = "RegistrationFailed"
	// ReasonCleanupFinished: the Node object and leftover pods of a node
	// whose machine was already taken back were deleted from the cluster
	// once its API answered.
	ReasonCleanupFinished EventReason = "CleanupFinished"
	// ReasonPermissionMissing: the cluster's API does not grant sparecap
	// something it uses (found by the permission check at attach or at
	// start, or by a call the cluster refused). Posted once per cluster
	// when the set of missing permissions grows; the message names each
	// one and what it costs the tenant.
	ReasonPermissionMissing EventReason = "PermissionMissing"
	// ReasonDrainReasonKept: a node sparecap drains had been drained by
	// someone else; sparecap left their reason as it was (Slurm).
	ReasonDrainReasonKept EventReason = "DrainReasonKept"
	// ReasonJobRequeued: a Slurm job noticed on a reclaimed node was
	// requeued by sparecap (it ended after its notice, or its deadline
	// came), once per reclaim.
	ReasonJobRequeued EventReason = "JobRequeued"
	// ReasonWorkloadRequeued: at the notice of a reclaimed node, sparecap's
	// Kueue admission check set Retry on the workloads running there, so
	// Kueue evicted and requeued them at once.
	ReasonWorkloadRequeued EventReason = "WorkloadRequeued"
	// ReasonNodeConverted: the tenant converted the node to the other
	// class in place (no drain); billing splits at that second.
	ReasonNodeConverted EventReason = "NodeConverted"
	// ReasonBudgetAlert: one of the project's budgets raised an alert (a
	// threshold of spend, the forecast, a jump in a day's spend). It is
	// the project's, about no cluster: it is delivered to the webhook
	// endpoints that ask for it and filter no cluster.
	ReasonBudgetAlert EventReason = "BudgetAlert"
	// ReasonStorageQuotaReached: the project keeps as much as its storage
	// quota allows, so its optional writes are refused (new work spans,
	// budgets, webhook endpoints); one on each of its clusters.
	ReasonStorageQuotaReached EventReason = "StorageQuotaReached"
	// ReasonPreemptionScheduled: the node's machine is booked (another
	// cluster booked ahead, or maintenance), so its notice will come at
	// the event's Deadline (its preempt_at), hours or days ahead. On the
	// booked cluster (no node): how many machines its booking claims.
	ReasonPreemptionScheduled EventReason = "PreemptionScheduled"
	// ReasonPreemptionCancelled: the node's machine is no longer claimed
	// (the booking moved or was cancelled, or claims other machines now).
	ReasonPreemptionCancelled EventReason = "PreemptionCancelled"
)

// Project is a tenant.
type Project struct {
	ID        string
	CreatedAt time.Time
	// StorageQuota bounds, in bytes, what the project's own input makes
	// the server keep (0: the server's default; see StorageTables).
	StorageQuota int64
}

// Token is an API token, stored only as its SHA-256 hash.
type Token struct {
	// ID names the token in the API and the logs; the token itself (the
	// secret) is shown once, when it is made, and stored as Hash.
	ID   string
	Hash string
	// ProjectID is the project the token acts for; "" for an operator
	// (admin) token.
	ProjectID string
	// Name is a label its owner chose ("ci", "laptop").
	Name      string
	CreatedAt time.Time
	// ExpiresAt, if set, is when it stops working; RevokedAt, if set, when
	// it was revoked. LastUsedAt is when it was last seen (to the minute:
	// uses are recorded in batches).
	ExpiresAt, RevokedAt, LastUsedAt time.Time
}

// Operator reports whether t is an operator (admin) token.
func (t Token) Operator() bool { return t.ProjectID == "" }

// State is "active", "expired" or "revoked" at now.
func (t Token) State(now time.Time) string {
	switch {
	case !t.RevokedAt.IsZero():
		return TokenRevoked
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return TokenExpired
	}
	return TokenActive
}

// The states of a token.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// Reservation is capacity bought by one project in one region and GPU type.
// Its machines carry the reservation's ID as their pool.
type Reservation struct {
	ID        string
	ProjectID string
	Region    string
	GPUType   string
	CreatedAt time.Time
}

// Machine is one GPU server of the fleet.
type Machine struct {
	ID      string
	Region  string
	GPUType string
	GPUs    int
	// ReservationID is empty for the on-demand pool.
	ReservationID string
	OutOfService  bool
	// CooldownUntil: a machine released by a standard node is not lent as
	// preemptible before this time (zero: no cooldown).
	CooldownUntil time.Time
	CreatedAt     time.Time
	// Failures counts its nodes' consecutive registration failures (reset
	// when one registers); past a limit the controller takes the machine
	// out of service and says why in OutOfServiceReason.
	Failures           int
	OutOfServiceReason string
	// MaintenanceAt: the operator booked the machine out for maintenance
	// from this time (zero: none). The plan takes it out of lending a
	// drain window before, so it is free by then.
	MaintenanceAt time.Time
	// ClaimedBy and PreemptAt are a booking's claim on the machine: the
	// booked cluster (ClaimedBy; empty for maintenance) takes it back
	// from whatever runs on it, whose notice comes at PreemptAt. Zero
	// PreemptAt: no claim. See docs/concepts.md "Capacity booked ahead".
	ClaimedBy string
	PreemptAt time.Time
}

// Capacity names the capacity m is for a tenant that borrows it: its
// pool's kind and region ("reserved capacity in us-east-1"), never its
// ID, which may name the reservation's owner.
func (m Machine) Capacity() string {
	kind := "on-demand capacity"
	if m.ReservationID != "" {
		kind = "reserved capacity"
	}
	if m.Region == "" {
		return kind
	}
	return kind + " in " + m.Region
}

// MaxWeight bounds a cluster's Weight. A share is weight/Σweights of spare
// capacity, so 1000 already gives one cluster 99.9% against another.
const MaxWeight = 1000

// Cluster is a tenant's Kubernetes cluster.
type Cluster struct {
	ID          string
	Name        string
	ProjectID   string
	Region      string
	GPUType     string
	Type        ClusterType
	BillingType BillingType
	NumGPUs     int // standard GPUs
	// DesiredPreemptibleGPUs is the preemptible target the tenant set
	// (num_preemptible_gpus), kept until changed.
	DesiredPreemptibleGPUs int
	// MaxPreemptibleGPUs caps what the tenant's queue may ask for through
	// ProvisioningRequests of sparecap's class (0, the default: requests
	// are not taken). RequestedPreemptibleGPUs is what those requests ask
	// for now, written by the controller that reconciles them. See
	// TargetPreemptibleGPUs.
	MaxPreemptibleGPUs       int
	RequestedPreemptibleGPUs int
	// PreemptibleGPUTypes are the GPU types of its region its preemptible
	// target may be of, in order of preference (none: GPUType), chosen
	// by PreemptibleStrategy; MaxPreemptiblePrice caps the preemptible
	// price per GPU-hour of a type it takes (a decimal string; "": none).
	// Only the list is settable through the API yet (the strategy is then
	// in-order, with no cap).
	PreemptibleGPUTypes []string
	PreemptibleStrategy string
	MaxPreemptiblePrice string
	// Weight for max-min fair sharing of spare capacity (1 by default,
	// at most MaxWeight): a cluster's share is proportional to it.
	Weight int
	Status ClusterStatus
	// Unfulfilled is set whenever allocated < desired preemptible GPUs.
	Unfulfilled        UnfulfilledReason
	UnfulfilledMessage string
	// UnmetSince is when the preemptible target last became unmet (ready
	// preemptible GPUs below the target); zero while it is met. Among
	// clusters equally entitled to a freed node, the one unmet longest
	// gets it, so nobody waits forever.
	UnmetSince time.Time
	Deleting   bool
	// NodeSeq numbers the cluster's nodes; the next node is NodeSeq+1.
	NodeSeq   int64
	CreatedAt time.Time
	DeletedAt time.Time
	// StartsAt: a standard cluster booked ahead starts then (zero: at
	// creation); its status is Scheduled until its nodes are planned,
	// from ActiveAt (StartsAt less the drain window and its pool's
	// provisioning lead, so that it is Ready at StartsAt); it is billed
	// from StartsAt.
	StartsAt time.Time
	ActiveAt time.Time
	// KubeAttachedAt is when an operator attached the cluster's Kubernetes
	// API (a kubeconfig, kept sealed by the store and never returned);
	// zero: the cluster runs on the simulated driver.
	KubeAttachedAt time.Time
	// Access is what sparecap knows of the permissions the attached API
	// grants it (zero while none is attached or it was never checked).
	Access Access
}

// TargetPreemptibleGPUs is the preemptible target sparecap fills: the
// tenant's own (DesiredPreemptibleGPUs), or what its queue's requests ask
// for when that is more, within MaxPreemptibleGPUs. A target set by hand
// is a floor the queue never lowers.
func (c Cluster) TargetPreemptibleGPUs() int {
	return max(c.DesiredPreemptibleGPUs, min(c.RequestedPreemptibleGPUs, c.MaxPreemptibleGPUs))
}

// Node is a machine serving a cluster in one compute class.
type Node struct {
	ID        string
	ClusterID string
	MachineID string
	Name      string
	Class     ComputeClass
	GPUs      int
	// GPUType is its machine's: a cluster's preemptible nodes may be of
	// several types, each billed at its own price.
	GPUType   string
	State     NodeState
	CreatedAt time.Time
	ReadyAt   time.Time
	// Drain fields, set at T+0.
	DrainStartedAt time.Time
	Deadline       time.Time
	DrainCause     DrainCause
	// Notified: the T+0 actions (cordon, taint, annotate, event, SIGTERM)
	// were all applied. They are idempotent and redone until this is set.
	Notified  bool
	DrainedAt time.Time
	Outcome   DrainOutcome
	RemovedAt time.Time
	// LastError is the last failure of a step on this node (a provision
	// hook that failed, a cluster API that did not answer); empty once the
	// step succeeds.
	LastError string
	// CleanupPending: the machine was taken back (at the deadline, or the
	// node was lost) but the node's objects in the tenant's cluster (its
	// Node object, pods left on it) are not deleted yet. Cleanup retries in
	// the background until the cluster's API answers or the cluster is
	// detached or deleted; it never holds the machine.
	CleanupPending bool
	// ProvisioningAt is when the node started provisioning (the
	// registration timeout counts from it).
	ProvisioningAt time.Time
	// ClassSince is when the node was last converted to its Class, to
	// the second (zero: never; it has had its class since ReadyAt). Its
	// billing in the earlier class ended then, in a usage record of its
	// own.
	ClassSince time.Time
}

// LeaseEnd is when a minimum lease of lease ends for the node: lease after
// it became ready as a preemptible node (or was converted to one). Zero
// for a node that is not a ready preemptible one, or no lease.
func (n Node) LeaseEnd(lease time.Duration) time.Time {
	if n.Class != Preemptible || n.State != NodeReady || n.ReadyAt.IsZero() || lease <= 0 {
		return time.Time{}
	}
	return n.PeriodStart().Add(lease)
}

// PeriodStart is when the node's billing in its current class starts:
// ready, or converted since.
func (n Node) PeriodStart() time.Time {
	if n.ClassSince.After(n.ReadyAt) {
		return n.ClassSince
	}
	return n.ReadyAt
}

// Event is a node lifecycle event.
type Event struct {
	// Seq orders events and serves as the paging cursor.
	Seq       int64
	ID        string
	ClusterID string
	NodeID    string
	NodeName  string
	Reason    EventReason
	Message   string
	Timestamp time.Time
	Deadline  time.Time
}

// Errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrStale: a node moved on since it was read; the step that read it
	// is dropped.
	ErrStale = errors.New("node state changed")
)

// UsageRecord is the meter's ledger entry for one node in one class: its
// billable time so far (a node converted in place has one record per
// class period, keyed by node and Start), with what pricing needs copied in, so invoices do not depend on
// clusters or nodes that may be deleted later.
type UsageRecord struct {
	NodeID        string
	NodeName      string
	ClusterID     string
	ClusterName   string
	ProjectID     string
	Region        string
	GPUType       string
	Class         ComputeClass
	BillingType   BillingType
	ReservationID string // of the node's machine, if any
	GPUs          int
	// Start is when the node became ready, or was converted to Class
	// (Node.PeriodStart); End how far it is billed in Class.
	Start, End time.Time
	// Final: End is the node's billing stop; the record will not change.
	Final bool
	// MaxRateMicros caps what a preemptible node is billed per GPU-hour
	// (its cluster's max_preemptible_price; 0: no cap).
	MaxRateMicros uint64
}

// PriceKind says what a price book entry prices.
type PriceKind string

const (
	// PriceOnDemand: per GPU-hour, by GPU type and optionally region.
	PriceOnDemand PriceKind = "on_demand"
	// PriceReserved: per GPU-hour for the standard nodes of a reservation.
	PriceReserved PriceKind = "reserved"
	// PricePreemptibleDiscount: the flat discount of preemptible capacity
	// off the on-demand price, in percent.
	PricePreemptibleDiscount PriceKind = "preemptible_discount"
)

// Price is an entry of the price book. Entries are never changed: a new
// price is a new entry that takes effect from its EffectiveFrom, so past
// usage keeps the price it had.
type Price struct {
	ID            string
	Kind          PriceKind
	Region        string // "" for every region
	GPUType       string
	ReservationID string
	// Value is a decimal string: dollars per GPU-hour, or percent for
	// the discount.
	Value         string
	EffectiveFrom time.Time
	CreatedAt     time.Time
}

// nameRE is the rule for region and GPU type names, wherever they come
// from (the fleet file, the admin API): they are shown to every tenant,
// in terminals too, so no spaces, control characters or markup.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidName reports whether s may name a region or a GPU type: 1-63
// letters, digits, '_', '.' or '-', starting with a letter or digit.
func ValidName(s string) bool { return nameRE.MatchString(s) }
