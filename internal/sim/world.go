package sim

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// world is the whole simulated state: everything here is persisted.
type world struct {
	nodes    map[nodeKey]*node
	machines map[string]*machine
	// Events is the fleet-wide event log in Seq order, capped at maxLogEvents.
	Events   []*event
	EventSeq int64
}

func newWorld() world {
	return world{nodes: map[nodeKey]*node{}, machines: map[string]*machine{}}
}

type nodeKey struct{ cluster, name string }

type node struct {
	ClusterID     string              `json:"clusterID"`
	Name          string              `json:"name"`
	MachineID     string              `json:"machineID,omitempty"`
	Class         domain.ComputeClass `json:"class,omitempty"`
	GPUs          int                 `json:"gpus,omitempty"`
	Profile       string              `json:"profile"`
	Labels        map[string]string   `json:"labels"`
	Taints        []Taint             `json:"taints,omitempty"`
	Annotations   map[string]string   `json:"annotations"`
	Unschedulable bool                `json:"unschedulable,omitempty"`
	AddedAt       time.Time           `json:"addedAt"`
	// NotReadySince: the node's kubelet stopped reporting Ready then
	// (zero while Ready); see Fleet.SetReady.
	NotReadySince time.Time `json:"notReadySince,omitzero"`
	Events        []*event  `json:"events,omitempty"`
	Pods          []*pod    `json:"pods,omitempty"`
}

type event struct {
	Seq       int64  `json:"seq"`
	ClusterID string `json:"clusterID"`
	NodeName  string `json:"nodeName"`
	// Pod is "namespace/name" for an event about a pod on the node.
	Pod     string    `json:"pod,omitempty"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	FirstAt time.Time `json:"firstAt"`
	LastAt  time.Time `json:"lastAt"`
	Count   int       `json:"count"`
}

type pod struct {
	Namespace              string            `json:"namespace"`
	Name                   string            `json:"name"`
	TerminationGracePeriod time.Duration     `json:"terminationGracePeriod"`
	ExitAfter              time.Duration     `json:"exitAfter"`
	DaemonSet              bool              `json:"daemonSet,omitempty"`
	ReadsDeadline          bool              `json:"readsDeadline,omitempty"`
	External               bool              `json:"external,omitempty"`
	GPUs                   int               `json:"gpus,omitempty"`
	Labels                 map[string]string `json:"labels,omitempty"`
	// Deadline is the deadline annotation a drain set, for a pod that
	// reads it; zero if none.
	Deadline time.Time `json:"deadline,omitzero"`
	// SIGTERMAt is when deletion was first requested; zero while running.
	SIGTERMAt time.Time `json:"sigtermAt,omitzero"`
	// Grace is the grace period in force, measured from SIGTERMAt.
	Grace time.Duration `json:"grace,omitempty"`
	// GoneAt is when the pod is gone, fixed at deletion (or when an
	// External pod's process ended); End says how.
	GoneAt time.Time `json:"goneAt,omitzero"`
	End    PodEnd    `json:"end,omitempty"`
}

// state of the pod as of now.
func (p *pod) state(now time.Time) PodState {
	switch {
	case !p.GoneAt.IsZero() && !now.Before(p.GoneAt):
		return PodGone
	case p.SIGTERMAt.IsZero():
		return PodRunning
	}
	return PodTerminating
}

// delete applies a deletion request with the grace period at now and
// reports whether it changed anything.
func (p *pod) delete(now time.Time, grace time.Duration) bool {
	switch p.state(now) {
	case PodGone:
		return false
	case PodRunning:
		p.SIGTERMAt = now
	case PodTerminating:
		// The API server only lets a later request shorten the grace
		// period; the new one counts from the original request.
		if grace >= p.Grace {
			return false
		}
	}
	if grace <= 0 {
		p.Grace, p.GoneAt, p.End = 0, now, PodForceDeleted
		return true
	}
	p.Grace = grace
	if p.ExitAfter >= 0 && p.ExitAfter <= grace {
		// Exits on its own; when shortening, that time is still ahead
		// (it is no later than the GoneAt that has not passed yet).
		p.GoneAt, p.End = p.SIGTERMAt.Add(p.ExitAfter), PodExited
		return true
	}
	p.GoneAt, p.End = p.SIGTERMAt.Add(grace), PodKilled
	if p.GoneAt.Before(now) {
		// A shortened grace period that has already run out: the kubelet
		// kills the pod now.
		p.GoneAt = now
	}
	return true
}

type machineJob string

const (
	jobPrepare machineJob = "prepare"
	jobWipe    machineJob = "wipe"
)

type machine struct {
	ID        string     `json:"id"`
	Job       machineJob `json:"job"`
	ClusterID string     `json:"clusterID,omitempty"`
	NodeName  string     `json:"nodeName"`
	StartedAt time.Time  `json:"startedAt"`
}
