package domain

import "time"

// RollupKind says what a rollup row sums.
type RollupKind string

const (
	// RollupUsage: a cluster's usage lines of one compute class, priced
	// (what invoices and the usage by cluster or class read).
	RollupUsage RollupKind = "usage"
	// RollupWork: the share of a cluster's usage that work of one
	// namespace, account and label set held (cost allocation).
	RollupWork RollupKind = "work"
	// RollupIdle: the rest of a cluster's usage, held by no work.
	RollupIdle RollupKind = "idle"
	// RollupMore: the work of the smallest groups past MaxRollupGroups
	// of a cluster's (or a project's) month, as one group: a tenant
	// whose every pod has labels of its own cannot grow the rollups
	// past that.
	RollupMore RollupKind = "more"
)

// MaxRollupGroups bounds the work groups a cluster's or a project's
// month keeps in its rollup (RollupMore holds the rest).
const MaxRollupGroups = 1000

// MoreGroups is the group a split shows for RollupMore's work.
const MoreGroups = "(more groups)"

// Rollup is one row of a closed month's rollup of one cluster: a group of
// usage lines merged as the usage API merges them (a field on which the
// lines differ is blank), with its exact sums. A month is rolled once
// nothing still open overlaps it, and again when a late row touches it;
// reads of whole closed months come from here, so its raw usage records
// and work spans may go.
type Rollup struct {
	// Month is the first instant of the month, UTC.
	Month                time.Time
	ProjectID, ClusterID string
	Kind                 RollupKind
	// Namespace, Account and Labels are the work's (RollupWork only); the
	// store keeps each distinct label set once.
	Namespace, Account string
	Labels             map[string]string

	// The merged line.
	ClusterName, NodeID, NodeName, Class, Region, GPUType string
	GPUs                                                  int
	Rate, OnDemandRate                                    string
	Priced                                                bool
	Start, End                                            time.Time
	BilledSeconds, GPUSeconds, UnpricedGPUSeconds         int64
	// Amount and OnDemand are exact: numerators over billing.Denom, in
	// decimal.
	Amount, OnDemand string
	// Units is the most progress the group's work reported (0: none);
	// HasLine is false for a group that reported progress but held no
	// GPU-second of the month.
	Units   int64
	HasLine bool
}

// ClusterMonth names one cluster's month, of its project; with no
// ClusterID, the project's month: its rows merged across its clusters
// (usage by class, work by namespace, account and label set), which a
// question about a project or the fleet reads instead of every cluster's.
type ClusterMonth struct {
	Month                time.Time
	ProjectID, ClusterID string
}

// RollupState is how far the rollups reach: every month before
// RolledUntil is rolled for the whole fleet, and Dirty are the cluster
// months a late row touched since, to roll again.
type RollupState struct {
	RolledUntil time.Time
	Dirty       []ClusterMonth
}
