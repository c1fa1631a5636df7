package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
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
	Taints        []driver.Taint      `json:"taints,omitempty"`
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
	Namespace              string        `json:"namespace"`
	Name                   string        `json:"name"`
	TerminationGracePeriod time.Duration `json:"terminationGracePeriod"`
	ExitAfter              time.Duration `json:"exitAfter"`
	DaemonSet              bool          `json:"daemonSet,omitempty"`
	// SIGTERMAt is when deletion was first requested; zero while running.
	SIGTERMAt time.Time `json:"sigtermAt,omitzero"`
	// Grace is the grace period in force, measured from SIGTERMAt.
	Grace time.Duration `json:"grace,omitempty"`
	// GoneAt is when the pod is gone, fixed at deletion; End says how.
	GoneAt time.Time `json:"goneAt,omitzero"`
	End    PodEnd    `json:"end,omitempty"`
}

// state of the pod as of now.
func (p *pod) state(now time.Time) PodState {
	switch {
	case p.SIGTERMAt.IsZero():
		return PodRunning
	case now.Before(p.GoneAt):
		return PodTerminating
	}
	return PodGone
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

// ---- persistence ----

const stateVersion = 1

// stateFile is the JSON form of world, with nodes and machines as sorted
// lists so the file is stable and readable.
type stateFile struct {
	Version  int        `json:"version"`
	EventSeq int64      `json:"eventSeq"`
	Nodes    []*node    `json:"nodes"`
	Machines []*machine `json:"machines"`
	Events   []*event   `json:"events"`
}

func save(path string, w *world) error {
	sf := stateFile{Version: stateVersion, EventSeq: w.EventSeq, Events: w.Events}
	for _, n := range w.nodes {
		sf.Nodes = append(sf.Nodes, n)
	}
	slices.SortFunc(sf.Nodes, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.ClusterID, b.ClusterID), cmp.Compare(a.Name, b.Name))
	})
	for _, m := range w.machines {
		sf.Machines = append(sf.Machines, m)
	}
	slices.SortFunc(sf.Machines, func(a, b *machine) int { return cmp.Compare(a.ID, b.ID) })
	data, err := json.MarshalIndent(sf, "", " ")
	if err != nil {
		return fmt.Errorf("encode sim state: %w", err)
	}
	if err := writeAtomic(path, data); err != nil {
		return fmt.Errorf("save sim state: %w", err)
	}
	return nil
}

// writeAtomic replaces path with data so that a crash leaves either the old
// or the new file: temp file in the same directory, fsync, rename, fsync of
// the directory.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write temp file: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync temp file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close temp file: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		// Makes the rename durable; best effort, as some systems cannot
		// sync directories.
		d.Sync()
		d.Close()
	}
	return nil
}

// load reads the state file; ok is false if it does not exist.
func load(path string) (w world, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return world{}, false, nil
	}
	if err != nil {
		return world{}, false, fmt.Errorf("load sim state: %w", err)
	}
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return world{}, false, fmt.Errorf("load sim state %s: %w", path, err)
	}
	if sf.Version != stateVersion {
		return world{}, false, fmt.Errorf("load sim state %s: unknown version %d", path, sf.Version)
	}
	w = newWorld()
	w.EventSeq = sf.EventSeq
	w.Events = sf.Events
	for _, n := range sf.Nodes {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		w.nodes[nodeKey{n.ClusterID, n.Name}] = n
	}
	for _, m := range sf.Machines {
		w.machines[m.ID] = m
	}
	return w, true, nil
}
