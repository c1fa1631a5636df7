package sim

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// PodState is a pod's state as of the clock's now.
type PodState string

// Taint on a simulated node, as Kubernetes has them.
type Taint struct {
	Key    string
	Value  string
	Effect string // NoSchedule, NoExecute
}

const (
	PodRunning     PodState = "Running"
	PodTerminating PodState = "Terminating" // SIGTERM sent, not gone yet
	PodGone        PodState = "Gone"
)

// PodEnd says how a deleted pod ends (or ended).
type PodEnd string

const (
	PodExited       PodEnd = "Exited"       // exited on its own after SIGTERM
	PodKilled       PodEnd = "Killed"       // grace period ran out: SIGKILL
	PodForceDeleted PodEnd = "ForceDeleted" // deleted with grace 0
	PodCompleted    PodEnd = "Completed"    // an External pod that ended before any deletion
)

// PodView is a copy of a pod's state, including pods that are gone.
type PodView struct {
	Namespace              string
	Name                   string
	TerminationGracePeriod time.Duration
	// ExitAfter is how long after SIGTERM it exits on its own; negative:
	// never.
	ExitAfter time.Duration
	// ReadsDeadline and External as in its PodTemplate; Deadline is the
	// deadline annotation a drain set on it, zero if none.
	ReadsDeadline bool
	External      bool
	Deadline      time.Time
	State         PodState
	// Deletion, zero while running: when SIGTERM was sent, the grace period
	// in force, when the pod is (or was) gone and how.
	SIGTERMAt time.Time
	Grace     time.Duration
	GoneAt    time.Time
	End       PodEnd
}

// EventView is a copy of an event posted on a node.
type EventView struct {
	// Seq orders events across the fleet.
	Seq       int64
	ClusterID string
	NodeName  string
	// Pod is "namespace/name" for an event about a pod, empty for one
	// about the node.
	Pod     string
	Type    string
	Reason  string
	Message string
	FirstAt time.Time
	LastAt  time.Time
	// Count is how many times it was posted (identical posts aggregate).
	Count int
}

// NodeView is a copy of a node's state.
type NodeView struct {
	ClusterID     string
	Name          string
	MachineID     string
	Class         domain.ComputeClass
	GPUs          int
	Profile       string // default pod profile, or "custom" for Config.Pods
	AddedAt       time.Time
	Labels        map[string]string
	Taints        []Taint
	Annotations   map[string]string
	Unschedulable bool
	Events        []EventView
	// Pods in creation order, including those that are gone.
	Pods []PodView
}

// RunningPods counts the pods that have not been deleted.
func (v NodeView) RunningPods() int { return v.countPods(PodRunning) }

// TerminatingPods counts the pods that were sent SIGTERM and are not gone.
func (v NodeView) TerminatingPods() int { return v.countPods(PodTerminating) }

func (v NodeView) countPods(s PodState) int {
	n := 0
	for _, p := range v.Pods {
		if p.State == s {
			n++
		}
	}
	return n
}

// MachinePhase is where a machine's last job stands.
type MachinePhase string

const (
	MachinePreparing MachinePhase = "Preparing"
	MachinePrepared  MachinePhase = "Prepared"
	MachineWiping    MachinePhase = "Wiping"
	MachineWiped     MachinePhase = "Wiped"
)

// MachineView is a copy of a machine's state: its last job.
type MachineView struct {
	ID        string
	Phase     MachinePhase
	ClusterID string // empty if unknown (a wipe not preceded by Prepare)
	NodeName  string
	StartedAt time.Time
	DoneAt    time.Time // when the job finishes or finished
}

// Node returns the node, if it exists.
func (f *Fleet) Node(clusterID, name string) (NodeView, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, name}]
	if !ok {
		return NodeView{}, false
	}
	return n.view(f.clock.Now()), true
}

// Nodes returns the nodes of the cluster, or of every cluster if clusterID
// is empty, ordered by cluster ID and name.
func (f *Fleet) Nodes(clusterID string) []NodeView {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	var out []NodeView
	for _, n := range f.st.nodes {
		if clusterID == "" || n.ClusterID == clusterID {
			out = append(out, n.view(now))
		}
	}
	slices.SortFunc(out, func(a, b NodeView) int {
		return cmp.Or(cmp.Compare(a.ClusterID, b.ClusterID), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Events returns the fleet-wide event log in order, including events of
// nodes since deleted; only the latest 1000 are kept.
func (f *Fleet) Events() []EventView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]EventView, len(f.st.Events))
	for i, e := range f.st.Events {
		out[i] = e.view()
	}
	return out
}

// Machine returns the machine's last job, if it ever had one.
func (f *Fleet) Machine(id string) (MachineView, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.st.machines[id]
	if !ok {
		return MachineView{}, false
	}
	return f.machineView(m), true
}

// Machines returns every machine that ever had a job, ordered by ID.
func (f *Fleet) Machines() []MachineView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]MachineView, 0, len(f.st.machines))
	for _, m := range f.st.machines {
		out = append(out, f.machineView(m))
	}
	slices.SortFunc(out, func(a, b MachineView) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (f *Fleet) machineView(m *machine) MachineView {
	v := MachineView{ID: m.ID, ClusterID: m.ClusterID, NodeName: m.NodeName, StartedAt: m.StartedAt}
	done := f.clock.Now()
	if m.Job == jobPrepare {
		v.DoneAt = m.StartedAt.Add(f.provision)
		v.Phase = MachinePreparing
		if !done.Before(v.DoneAt) {
			v.Phase = MachinePrepared
		}
	} else {
		v.DoneAt = m.StartedAt.Add(f.wipe)
		v.Phase = MachineWiping
		if !done.Before(v.DoneAt) {
			v.Phase = MachineWiped
		}
	}
	return v
}

func (n *node) view(now time.Time) NodeView {
	v := NodeView{
		ClusterID:     n.ClusterID,
		Name:          n.Name,
		MachineID:     n.MachineID,
		Class:         n.Class,
		GPUs:          n.GPUs,
		Profile:       n.Profile,
		AddedAt:       n.AddedAt,
		Labels:        maps.Clone(n.Labels),
		Taints:        slices.Clone(n.Taints),
		Annotations:   maps.Clone(n.Annotations),
		Unschedulable: n.Unschedulable,
	}
	for _, e := range n.Events {
		v.Events = append(v.Events, e.view())
	}
	for _, p := range n.Pods {
		v.Pods = append(v.Pods, PodView{
			Namespace:              p.Namespace,
			Name:                   p.Name,
			TerminationGracePeriod: p.TerminationGracePeriod,
			ExitAfter:              p.ExitAfter,
			ReadsDeadline:          p.ReadsDeadline,
			External:               p.External,
			Deadline:               p.Deadline,
			State:                  p.state(now),
			SIGTERMAt:              p.SIGTERMAt,
			Grace:                  p.Grace,
			GoneAt:                 p.GoneAt,
			End:                    p.End,
		})
	}
	return v
}

func (e *event) view() EventView {
	return EventView{
		Seq:       e.Seq,
		ClusterID: e.ClusterID,
		NodeName:  e.NodeName,
		Pod:       e.Pod,
		Type:      e.Type,
		Reason:    e.Reason,
		Message:   e.Message,
		FirstAt:   e.FirstAt,
		LastAt:    e.LastAt,
		Count:     e.Count,
	}
}
