// Package apiv1 holds the JSON shapes of the /v1 REST API, shared by the
// server, the Go client and the CLI. Times are RFC 3339 UTC.
package apiv1

import (
	"fmt"
	"time"
)

// CreateClusterRequest is the body of POST /v1/clusters.
type CreateClusterRequest struct {
	ClusterName        string `json:"cluster_name" api:"required"`
	Region             string `json:"region" api:"required"`
	GPUType            string `json:"gpu_type" api:"required"`
	ClusterType        string `json:"cluster_type"`
	BillingType        string `json:"billing_type"`
	NumGPUs            int    `json:"num_gpus" api:"required"`
	NumPreemptibleGPUs int    `json:"num_preemptible_gpus"`
	// MaxPreemptibleGPUs lets the cluster's queue raise its preemptible
	// target up to this many GPUs with ProvisioningRequests of class
	// preemptible.sparecap.dev (0, the default: requests are not taken).
	// KUBERNETES clusters only.
	MaxPreemptibleGPUs int `json:"max_preemptible_gpus,omitempty"`
	// PreemptibleGPUTypes are the GPU types of the region the preemptible
	// target may be of, in order of preference (default: gpu_type, alone;
	// at most 8). The target counts GPUs across them; nodes held stay
	// where they are, the rest comes from the first type with spare
	// capacity.
	PreemptibleGPUTypes []string `json:"preemptible_gpu_types,omitempty"`
	// PreemptibleStrategy orders the types for what the cluster does not
	// hold yet: in-order (the default), lowest-price, capacity-optimized
	// or price-capacity-optimized. MaxPreemptiblePerGPUHour caps the
	// preemptible price per GPU-hour of a type it takes ("1.60"; "": no
	// cap).
	PreemptibleStrategy      string `json:"preemptible_strategy,omitempty"`
	MaxPreemptiblePerGPUHour string `json:"max_preemptible_per_gpu_hour,omitempty"`
	// ProjectID is required for admin tokens and optional (must match) for
	// project tokens.
	ProjectID string `json:"project_id,omitempty"`
	// StartsAt books the cluster's standard capacity ahead: it is Ready
	// then, billed from then, and its status is Scheduled until its nodes
	// are planned (active_at). Accepted only if the pool can hold it then;
	// at most a year ahead; standard capacity only.
	StartsAt *time.Time `json:"starts_at,omitempty"`
	// Kubeconfig, the YAML text of a kubeconfig, attaches the cluster's
	// Kubernetes API at creation (see AttachKubeconfigRequest). Only the
	// admin token may set it.
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// AttachKubeconfigRequest is the body of PUT
// /v1/admin/clusters/{id}/kubeconfig. Kubeconfig is the YAML text of a
// kubeconfig whose current context reaches the cluster's API server, with
// its credentials embedded (kubectl config view --minify --flatten --raw).
// It is stored sealed and never returned.
type AttachKubeconfigRequest struct {
	Kubeconfig string `json:"kubeconfig" api:"required"`
}

// AttachSlurmRequest is the body of PUT /v1/admin/clusters/{id}/slurm.
// SlurmConf is the text of the slurm.conf through which the Slurm client
// commands on sparecap's host reach the tenant's slurmctld, with its
// authentication (AuthInfo names the munge socket whose key is the
// tenant's). It is stored sealed and never returned.
type AttachSlurmRequest struct {
	SlurmConf string `json:"slurm_conf" api:"required"`
}

// UpdateClusterRequest is the body of PATCH /v1/clusters/{id}. Omitted
// fields keep their value.
type UpdateClusterRequest struct {
	NumGPUs            *int `json:"num_gpus,omitempty"`
	NumPreemptibleGPUs *int `json:"num_preemptible_gpus,omitempty"`
	MaxPreemptibleGPUs *int `json:"max_preemptible_gpus,omitempty"`
	// StartsAt moves a booking (a cluster still Scheduled), alone.
	StartsAt *time.Time `json:"starts_at,omitempty"`
	// PreemptibleGPUTypes, PreemptibleStrategy and
	// MaxPreemptiblePerGPUHour as at creation; an empty list is the
	// cluster's own type, "" no cap.
	PreemptibleGPUTypes      *[]string `json:"preemptible_gpu_types,omitempty"`
	PreemptibleStrategy      *string   `json:"preemptible_strategy,omitempty"`
	MaxPreemptiblePerGPUHour *string   `json:"max_preemptible_per_gpu_hour,omitempty"`
}

// SetClusterWeightRequest is the body of PATCH /v1/admin/clusters/{id}.
type SetClusterWeightRequest struct {
	// Weight in the max-min fair sharing of spare capacity, 1..1000.
	Weight *int `json:"weight,omitempty"`
}

// ConvertNodeRequest is the body of POST
// /v1/clusters/{id}/nodes/{node}/convert: the class to convert a ready
// node to in place, "standard" or "preemptible".
type ConvertNodeRequest struct {
	ComputeClass string `json:"compute_class" api:"required"`
}

// Cluster in responses.
type Cluster struct {
	ClusterID   string `json:"cluster_id"`
	ClusterName string `json:"cluster_name"`
	ProjectID   string `json:"project_id"`
	Region      string `json:"region"`
	GPUType     string `json:"gpu_type"`
	ClusterType string `json:"cluster_type"`
	BillingType string `json:"billing_type"`
	Status      string `json:"status"`
	NumGPUs     int    `json:"num_gpus"`
	// DesiredPreemptibleGPUs is the target the tenant set
	// (num_preemptible_gpus), kept until changed.
	DesiredPreemptibleGPUs   int `json:"desired_preemptible_gpus"`
	AllocatedPreemptibleGPUs int `json:"allocated_preemptible_gpus"`
	// AllocatedPreemptibleByType is allocated_preemptible_gpus by GPU
	// type (absent while none is allocated).
	AllocatedPreemptibleByType map[string]int `json:"allocated_preemptible_by_type,omitempty"`
	// MaxPreemptibleGPUs is how far the cluster's queue may raise the
	// target with ProvisioningRequests (0: not at all);
	// RequestedPreemptibleGPUs what those requests ask for now.
	MaxPreemptibleGPUs       int `json:"max_preemptible_gpus"`
	RequestedPreemptibleGPUs int `json:"requested_preemptible_gpus"`
	// PreemptibleGPUTypes are the types the preemptible target may be of,
	// in order of preference (gpu_type alone unless the cluster was made
	// with several).
	PreemptibleGPUTypes []string `json:"preemptible_gpu_types"`
	// PreemptibleStrategy is how the types are chosen (in-order unless
	// set); MaxPreemptiblePerGPUHour the cap on a type's preemptible
	// price per GPU-hour ("": none).
	PreemptibleStrategy      string `json:"preemptible_strategy"`
	MaxPreemptiblePerGPUHour string `json:"max_preemptible_per_gpu_hour"`
	// TargetPreemptibleGPUs is what sparecap fills: the desired target,
	// or what the requests ask for within the maximum when that is more.
	TargetPreemptibleGPUs int `json:"target_preemptible_gpus"`
	// Weight is the cluster's weight in the max-min fair sharing of spare
	// capacity (1 unless an operator set it).
	Weight int `json:"weight"`
	// TargetUnfulfilled is set when allocated < target.
	TargetUnfulfilled *Unfulfilled `json:"target_unfulfilled,omitempty"`
	GPUWorkerNodes    []Node       `json:"gpu_worker_nodes"`
	CreatedAt         time.Time    `json:"created_at"`
	// StartsAt: a booking's start (absent for a cluster that started at
	// creation); ActiveAt: when its nodes are planned, a drain window
	// and its pool's provisioning time before, and the nodes its booking
	// claims get their notice. Both absent for a cluster never booked.
	StartsAt *time.Time `json:"starts_at,omitempty"`
	ActiveAt *time.Time `json:"active_at,omitempty"`
	// Kubernetes says whether the cluster's Kubernetes API is attached
	// (never, for a SLURM cluster).
	Kubernetes KubernetesStatus `json:"kubernetes"`
	// Slurm says whether a SLURM cluster's slurm.conf is attached; absent
	// for a KUBERNETES cluster.
	Slurm *AttachStatus `json:"slurm,omitempty"`
	// Access says which permissions sparecap uses the attached API does
	// not grant it, and what each costs; absent until it was checked.
	Access *Access `json:"access,omitempty"`
}

// Access is what sparecap found of the permissions an attached cluster's
// API grants it: checked when the cluster is attached and whenever a
// server starts driving it, and updated when a call is refused.
type Access struct {
	CheckedAt *time.Time `json:"checked_at,omitempty"`
	// Missing are the permissions it lacks; empty when it has them all.
	Missing []MissingPermission `json:"missing"`
}

// MissingPermission is one permission the cluster does not grant.
type MissingPermission struct {
	// Permission is "VERB RESOURCE", e.g. "patch pods/status".
	Permission string `json:"permission"`
	// Essential: sparecap cannot keep its contract without it (an attach
	// lacking one is refused); otherwise every pod still gets its notice
	// and Effect says what the tenant loses.
	Essential bool      `json:"essential"`
	Effect    string    `json:"effect"`
	Since     time.Time `json:"since"`
	// Detail is what the cluster answered to a refused call.
	Detail string `json:"detail,omitempty"`
}

// KubernetesStatus tells whether an operator attached the cluster's
// Kubernetes API (a kubeconfig). The kubeconfig itself and the API
// server's address are never returned.
type KubernetesStatus struct {
	Attached bool `json:"attached"`
	// AttachedAt is when the current kubeconfig was attached.
	AttachedAt *time.Time `json:"attached_at,omitempty"`
}

// AttachStatus tells whether an operator attached a cluster's Slurm (its
// slurm.conf, never returned).
type AttachStatus struct {
	Attached   bool       `json:"attached"`
	AttachedAt *time.Time `json:"attached_at,omitempty"`
}

// Unfulfilled says why allocated < desired.
type Unfulfilled struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Node of a cluster.
type Node struct {
	NodeID       string `json:"node_id"`
	NodeName     string `json:"node_name"`
	ComputeClass string `json:"compute_class"`
	Status       string `json:"status"`
	NumGPUs      int    `json:"num_gpus"`
	// GPUType is its machine's; it is billed at that type's price.
	GPUType   string     `json:"gpu_type"`
	CreatedAt time.Time  `json:"created_at"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
	// ClassSince: when the node was converted to its compute class in
	// place (absent if never); it is billed in that class from then.
	ClassSince *time.Time `json:"class_since,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	// PreemptAt: when the node's notice will come, its machine being
	// booked (another cluster booked ahead, or maintenance); absent when
	// none is. Also the annotation sparecap.dev/preempt-at on a
	// Kubernetes node and its pods, and the Slurm node's Extra.
	PreemptAt *time.Time `json:"preempt_at,omitempty"`
	// LeaseEnd: until when a ready preemptible node is inside its pool's
	// minimum lease (absent when the pool has none).
	LeaseEnd *time.Time `json:"lease_end,omitempty"`
	// LastError is the last failure of a step on the node (a provision
	// hook, a call to the cluster's API), until the step succeeds. The
	// API server's address is masked in it.
	LastError string `json:"last_error,omitempty"`
	// Outcome of a node on its way out: early (its pods exited before the
	// deadline), deadline, or lost (its Node was deleted by someone else
	// or stayed NotReady too long).
	Outcome string `json:"outcome,omitempty"`
	// CleanupPending: the node's machine was taken back, but its objects
	// in the cluster (the Node, pods left on it) are not deleted yet
	// because the cluster's API did not answer; sparecap keeps trying.
	// Removed nodes are listed while it is set.
	CleanupPending bool `json:"cleanup_pending,omitempty"`
}

// ClusterList is the body of GET /v1/clusters.
type ClusterList struct {
	Clusters []Cluster `json:"clusters"`
}

// Event is a node lifecycle event.
type Event struct {
	EventID   string     `json:"event_id"`
	Cursor    string     `json:"cursor"`
	ClusterID string     `json:"cluster_id"`
	NodeID    string     `json:"node_id,omitempty"`
	NodeName  string     `json:"node_name,omitempty"`
	Reason    string     `json:"reason"`
	Message   string     `json:"message"`
	Timestamp time.Time  `json:"timestamp"`
	Deadline  *time.Time `json:"deadline,omitempty"`
}

// EventList is the body of GET /v1/clusters/{id}/events. Pass NextCursor
// as ?cursor= to get the events after these.
type EventList struct {
	Events     []Event `json:"node_lifecycle_events"`
	NextCursor string  `json:"next_cursor"`
}

// Capacity of one region and GPU type, in GPUs.
type Capacity struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
	Total   int    `json:"total_gpus"`
	// AvailableOnDemand: what a new ON_DEMAND standard request could get now
	// (free on-demand machines plus those reclaimable from preemptible).
	AvailableOnDemand int `json:"available_on_demand_gpus"`
	// AvailablePreemptible: the spare capacity preemptible targets share:
	// machines of any pool, idle reservations included, not serving
	// standard nodes (it includes what is lent out now).
	AvailablePreemptible int `json:"available_preemptible_gpus"`
	// Free: idle this moment.
	Free             int `json:"free_gpus"`
	Reserved         int `json:"reserved_gpus"`
	InUseStandard    int `json:"in_use_standard_gpus"`
	InUsePreemptible int `json:"in_use_preemptible_gpus"`
	OutOfService     int `json:"out_of_service_gpus"`
}

// CapacityList is the body of GET /v1/capacity.
type CapacityList struct {
	Capacity []Capacity `json:"capacity"`
}

// WhoAmI is the body of GET /v1/whoami: what the caller's token is.
type WhoAmI struct {
	Admin     bool   `json:"admin"`
	ProjectID string `json:"project_id,omitempty"`
	// TokenID names the token the request was made with.
	TokenID string `json:"token_id,omitempty"`
}

// CreateProjectRequest is the body of POST /v1/admin/projects.
type CreateProjectRequest struct {
	ProjectID string `json:"project_id" api:"required"`
}

// Project with its token (shown once, at creation).
type Project struct {
	ProjectID string    `json:"project_id"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Token describes an API token. Token (the secret) is set only in the
// answer that made it (create, rotate): it is never shown again.
type Token struct {
	TokenID string `json:"token_id"`
	Name    string `json:"name"`
	// ProjectID is the project the token acts for; empty for an operator
	// (admin) token.
	ProjectID string `json:"project_id,omitempty"`
	Operator  bool   `json:"operator"`
	// State is active, expired or revoked.
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Token      string     `json:"token,omitempty"`
}

// TokenList is the body of GET /v1/tokens and GET
// /v1/admin/projects/{id}/tokens, oldest first.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// CreateTokenRequest is the body of POST /v1/tokens and POST
// /v1/admin/projects/{id}/tokens; every field is optional. ExpiresIn is
// a duration ("720h", "90m"); ExpiresAt a time. At most one of them.
type CreateTokenRequest struct {
	Name      string     `json:"name,omitempty"`
	ExpiresIn string     `json:"expires_in,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ProjectList is the body of GET /v1/admin/projects.
type ProjectList struct {
	Projects []Project `json:"projects"`
}

// CreateMachinesRequest is the body of POST /v1/admin/machines: Count
// machines of GPUsPerMachine GPUs each. IDs are generated unless MachineIDs
// is given (then Count must be 0 or equal its length).
type CreateMachinesRequest struct {
	Region         string   `json:"region" api:"required"`
	GPUType        string   `json:"gpu_type" api:"required"`
	Count          int      `json:"count"`
	GPUsPerMachine int      `json:"gpus_per_machine,omitempty"`
	ReservationID  string   `json:"reservation_id,omitempty"`
	MachineIDs     []string `json:"machine_ids,omitempty"`
}

// UpdateMachineRequest is the body of PATCH /v1/admin/machines/{id}.
type UpdateMachineRequest struct {
	OutOfService *bool `json:"out_of_service,omitempty"`
	// MaintenanceAt books the machine out for maintenance from that time
	// (RFC 3339; "" cancels): the node on it is told ahead (its
	// preempt_at, a drain window before) and the machine goes out of
	// service then. Putting it back in service ends the maintenance.
	MaintenanceAt *string `json:"maintenance_at,omitempty"`
}

// Machine of the fleet.
type Machine struct {
	MachineID     string `json:"machine_id"`
	Region        string `json:"region"`
	GPUType       string `json:"gpu_type"`
	GPUs          int    `json:"gpus"`
	Pool          string `json:"pool"` // "on-demand" or "reservation:<id>"
	ReservationID string `json:"reservation_id,omitempty"`
	State         string `json:"state"`
	ClusterID     string `json:"cluster_id,omitempty"`
	NodeName      string `json:"node_name,omitempty"`
	// OutOfServiceReason says why sparecap took the machine out of
	// service (its nodes kept failing to register); empty when the
	// operator did, or it is in service.
	OutOfServiceReason string `json:"out_of_service_reason,omitempty"`
	// RegistrationFailures counts its nodes' registration timeouts in a
	// row.
	RegistrationFailures int `json:"registration_failures,omitempty"`
	// MaintenanceAt: booked out for maintenance from then. ClaimedBy and
	// PreemptAt: the booked cluster that claims the machine (empty for
	// maintenance) and when the notice of the node on it comes.
	MaintenanceAt *time.Time `json:"maintenance_at,omitempty"`
	ClaimedBy     string     `json:"claimed_by,omitempty"`
	PreemptAt     *time.Time `json:"preempt_at,omitempty"`
}

// MachineList is the body of GET /v1/admin/machines.
type MachineList struct {
	Machines []Machine `json:"machines"`
}

// CreateReservationRequest is the body of POST /v1/admin/reservations.
type CreateReservationRequest struct {
	ReservationID string `json:"reservation_id,omitempty"`
	ProjectID     string `json:"project_id" api:"required"`
	Region        string `json:"region" api:"required"`
	GPUType       string `json:"gpu_type" api:"required"`
}

// Reservation of capacity for a project.
type Reservation struct {
	ReservationID string `json:"reservation_id"`
	ProjectID     string `json:"project_id"`
	Region        string `json:"region"`
	GPUType       string `json:"gpu_type"`
	Machines      int    `json:"machines"`
	GPUs          int    `json:"gpus"`
	// LentGPUs: GPUs of the reservation serving as preemptible right now.
	LentGPUs  int       `json:"lent_preemptible_gpus"`
	CreatedAt time.Time `json:"created_at"`
}

// ReservationList is the body of GET /v1/admin/reservations.
type ReservationList struct {
	Reservations []Reservation `json:"reservations"`
}

// Error is the body of every error response.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody carries a stable code and a message for people. Field names the
// request field at fault, when there is one.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Error codes.
const (
	CodeInvalid      = "invalid_argument"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeNoCapacity   = "insufficient_capacity"
	CodeUnauthorized = "unauthenticated"
	CodeForbidden    = "permission_denied"
	// CodeUnavailable: the server is not set up for the request (503), for
	// example attaching a kubeconfig without a secret key to seal it.
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
	// CodeRateLimited: too many requests from this client address or with
	// this token (429, with Retry-After).
	CodeRateLimited = "rate_limited"
	// CodeTooLarge: the request body is larger than the server takes (413).
	CodeTooLarge = "too_large"
	// CodeQuotaExceeded: the project keeps as much as its storage quota
	// allows; the optional write was refused (403).
	CodeQuotaExceeded = "storage_quota_exceeded"
)

// Storage is GET /v1/storage: what each project's own input makes the
// server keep, against its quota.
type Storage struct {
	// CountedAt is when the tables were last counted; writes since are
	// added as they are made.
	CountedAt time.Time        `json:"counted_at"`
	Projects  []ProjectStorage `json:"projects"`
}

// ProjectStorage is one project's storage.
type ProjectStorage struct {
	ProjectID  string         `json:"project_id"`
	QuotaBytes int64          `json:"quota_bytes"`
	UsedBytes  int64          `json:"used_bytes"`
	Over       bool           `json:"over"`
	Tables     []StorageTable `json:"tables"`
}

// StorageTable is what one table keeps of a project's input.
type StorageTable struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Bytes is n in binary units as the CLI and the console show a size
// ("1.5 GiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// SetStorageQuotaRequest is PUT /v1/admin/projects/{project}/storage-quota.
type SetStorageQuotaRequest struct {
	// Bytes is the project's quota; 0 returns it to the server's default.
	Bytes int64 `json:"bytes" api:"required"`
}

// Health is the body of /healthz and /readyz. Role, with several servers
// on PostgreSQL, is leader or follower.
type Health struct {
	Status string `json:"status"`
	Role   string `json:"role,omitempty"`
}
