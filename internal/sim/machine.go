package sim

// The machine side of a simulated node: preparing and wiping a machine,
// and the pods a node gets by default.

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Prepare starts preparing the machine for the node on its first call and
// reports done once ProvisionTime has passed since. A machine holds one job
// at a time: preparing it for another node, or after a wipe, starts anew.
func (f *Fleet) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if m.ID == "" {
		return false, errors.New("sim: prepare: machine has no ID")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	mc, ok := f.st.machines[m.ID]
	if ok && mc.Job == jobPrepare && mc.ClusterID == spec.ClusterID && mc.NodeName == spec.NodeName {
		done := !now.Before(mc.StartedAt.Add(f.provision))
		if !done {
			// Told again at every ask: a step that ran early (for another
			// reason) keeps its appointment.
			f.wake(spec.ClusterID, spec.NodeName, mc.StartedAt.Add(f.provision))
		}
		return done, f.finish(ctx, change{})
	}
	f.st.machines[m.ID] = &machine{
		ID:        m.ID,
		Job:       jobPrepare,
		ClusterID: spec.ClusterID,
		NodeName:  spec.NodeName,
		StartedAt: now,
	}
	if f.provision > 0 {
		f.wake(spec.ClusterID, spec.NodeName, now.Add(f.provision))
	}
	return f.provision <= 0, f.finish(ctx, change{Machines: []*machine{f.st.machines[m.ID]}})
}

// Wipe starts wiping the machine after the node on its first call and
// reports done once WipeTime has passed since.
func (f *Fleet) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if m.ID == "" {
		return false, errors.New("sim: wipe: machine has no ID")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	mc, ok := f.st.machines[m.ID]
	if ok && mc.Job == jobWipe && mc.NodeName == nodeName {
		done := !now.Before(mc.StartedAt.Add(f.wipe))
		if !done {
			f.wake(clusterID, nodeName, mc.StartedAt.Add(f.wipe)) // as Prepare
		}
		return done, f.finish(ctx, change{})
	}
	next := &machine{ID: m.ID, Job: jobWipe, ClusterID: clusterID, NodeName: nodeName, StartedAt: now}
	f.st.machines[m.ID] = next
	if f.wipe > 0 {
		f.wake(clusterID, nodeName, now.Add(f.wipe))
	}
	return f.wipe <= 0, f.finish(ctx, change{Machines: []*machine{next}})
}

// ---- default pod profiles ----

type profile struct {
	name string
	pods []PodTemplate
}

// defaultProfiles: two whose pods all exit well inside the five-minute drain
// window, and one with a trainer that ignores SIGTERM and asks for ten
// minutes of grace, so its drain runs to the deadline.
var defaultProfiles = []profile{
	{"inference", []PodTemplate{
		{Namespace: "ml", Name: "inference-server", TerminationGracePeriod: 30 * time.Second, ExitAfter: 10 * time.Second,
			GPUs: 8, Labels: map[string]string{"team": "serving", "app": "inference"}},
		{Namespace: "ml", Name: "metrics-sidecar", TerminationGracePeriod: 30 * time.Second, ExitAfter: time.Second},
	}},
	{"checkpointing-trainer", []PodTemplate{
		// Writes a checkpoint on SIGTERM, then exits.
		{Namespace: "ml", Name: "trainer", TerminationGracePeriod: 4 * time.Minute, ExitAfter: 150 * time.Second,
			GPUs: 4, Labels: map[string]string{"team": "research", "app": "trainer"}},
		{Namespace: "ml", Name: "data-loader", TerminationGracePeriod: 30 * time.Second, ExitAfter: 3 * time.Second},
	}},
	{"stubborn-trainer", []PodTemplate{
		{Namespace: "ml", Name: "trainer", TerminationGracePeriod: 10 * time.Minute, ExitAfter: NeverExits,
			GPUs: 8, Labels: map[string]string{"team": "vision", "app": "trainer"}},
		{Namespace: "ml", Name: "data-loader", TerminationGracePeriod: 30 * time.Second, ExitAfter: 3 * time.Second},
	}},
}

func defaultProfile(seed int64, clusterID, nodeName string) profile {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(clusterID))
	h.Write([]byte{0})
	h.Write([]byte(nodeName))
	return defaultProfiles[h.Sum64()%uint64(len(defaultProfiles))]
}

// DefaultPods returns the pods a node gets when Config.Pods is nil, and the
// name of their profile.
func DefaultPods(seed int64, clusterID, nodeName string) (profile string, pods []PodTemplate) {
	p := defaultProfile(seed, clusterID, nodeName)
	return p.name, slices.Clone(p.pods)
}

// ProvisionLead is how long a machine of any pool takes to provision:
// Config.ProvisionTime (driver.LeadTeller).
func (f *Fleet) ProvisionLead(region, gpuType string) (time.Duration, bool) {
	return max(f.provision, 0), true
}
