package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

var (
	_ driver.ClusterDriver   = (*Fleet)(nil)
	_ driver.MachineProvider = (*Fleet)(nil)
)

// ErrNoNode is returned (wrapped) by calls that act on a node the simulated
// cluster does not have. It wraps domain.ErrNotFound so callers may branch
// on either.
var ErrNoNode = fmt.Errorf("no such node: %w", domain.ErrNotFound)

// Defaults for Config.
const (
	DefaultProvisionTime = 20 * time.Second
	DefaultWipeTime      = 5 * time.Second
)

// NeverExits as a PodTemplate.ExitAfter makes a pod ignore SIGTERM: it lives
// until its grace period runs out.
const NeverExits time.Duration = -1

// maxLogEvents bounds the fleet-wide event log (Events); each node keeps its
// own events for as long as it exists. The bound keeps the snapshot of the
// state, which is rewritten at every compaction, small during long
// simulations.
const maxLogEvents = 1000

// PodTemplate describes a pod every new node starts with.
type PodTemplate struct {
	Namespace string // "default" if empty
	Name      string
	// TerminationGracePeriod from the pod spec.
	TerminationGracePeriod time.Duration
	// ExitAfter is how long after SIGTERM the pod exits on its own.
	// Negative (NeverExits): it ignores SIGTERM and is killed when its grace
	// period ends.
	ExitAfter time.Duration
	// DaemonSet: the pod belongs to a DaemonSet.
	DaemonSet bool
	// ReadsDeadline: the pod mounts its annotations (a Downward API
	// volume), so a deletion with a deadline records it as the pod's
	// deadline annotation first (PodView.Deadline), as the Kubernetes
	// driver does.
	ReadsDeadline bool
	// GPUs it requests and its labels, as the Kubernetes driver reports
	// them for cost allocation (a pod with no GPU has no share).
	GPUs   int
	Labels map[string]string
	// External: something outside the simulation runs the pod (a real
	// process, see package simjob) and reports its end with PodExited.
	// Until then it is killed when its grace period ends; ExitAfter is
	// ignored.
	External bool
}

// Config configures a Fleet. Only Clock is required.
type Config struct {
	// Clock is the only source of time.
	Clock clock.Clock
	// ProvisionTime is how long Prepare takes from its first call until it
	// reports done. Zero means DefaultProvisionTime; negative means at once.
	ProvisionTime time.Duration
	// WipeTime is the same for Wipe. Zero means DefaultWipeTime; negative
	// means at once.
	WipeTime time.Duration
	// Pods, if non-nil, are the pods every new node starts with (an empty
	// non-nil slice: no pods). If nil, each node gets one of the default
	// profiles, chosen deterministically from Seed, cluster ID and node name.
	Pods []PodTemplate
	// Seed varies the choice of default profiles between runs.
	Seed int64
	// StatePath, if set, is where the simulated world lives: a JSON
	// snapshot of the whole world at StatePath and a log of the changes
	// since at StatePath + ".log", to which every change is appended and
	// fsynced before the call returns. New loads both. A whole-state file
	// written by an earlier version loads as the snapshot.
	StatePath string
}

// Fleet is a simulated set of machines and the Kubernetes clusters they
// serve. It is safe for concurrent use.
type Fleet struct {
	clock     clock.Clock
	provision time.Duration
	wipe      time.Duration
	pods      []PodTemplate
	seed      int64

	mu sync.Mutex
	st world
	// store persists st; nil without Config.StatePath.
	store *store
	// wakeHook wakes a node's step (the controller's Hooks.Wake); called
	// under mu, it must not call the Fleet (see wake.go).
	wakeHook func(clusterID, nodeName string, at time.Time)
}

// New returns a Fleet, loading its state from cfg.StatePath (the snapshot
// and its log) if it exists. A torn last log record, left by a crash during
// a write, is ignored.
func New(cfg Config) (*Fleet, error) {
	if cfg.Clock == nil {
		return nil, errors.New("sim: config has no clock")
	}
	f := &Fleet{
		clock:     cfg.Clock,
		provision: durationOr(cfg.ProvisionTime, DefaultProvisionTime),
		wipe:      durationOr(cfg.WipeTime, DefaultWipeTime),
		seed:      cfg.Seed,
		st:        newWorld(),
	}
	if cfg.Pods != nil {
		f.pods = make([]PodTemplate, 0, len(cfg.Pods))
		seen := map[string]bool{}
		for _, t := range cfg.Pods {
			if t.Namespace == "" {
				t.Namespace = "default"
			}
			if t.Name == "" {
				return nil, errors.New("sim: pod template has no name")
			}
			if t.TerminationGracePeriod < 0 {
				return nil, fmt.Errorf("sim: pod template %s/%s: negative grace period", t.Namespace, t.Name)
			}
			k := t.Namespace + "/" + t.Name
			if seen[k] {
				return nil, fmt.Errorf("sim: pod template %s: duplicate", k)
			}
			seen[k] = true
			f.pods = append(f.pods, t)
		}
	}
	if cfg.StatePath != "" {
		s, st, err := openStore(cfg.StatePath)
		if err != nil {
			return nil, err
		}
		f.store, f.st = s, st
	}
	return f, nil
}

func durationOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// finish ends every public call with the lock held: it writes what the
// call changed (the zero change: nothing) and retries an earlier save
// that failed. Then, the lock released meanwhile, it waits until every
// change written so far is on disk (the call's own, and any it may have
// seen): one fsync serves every call waiting for it (group commit), so
// concurrent calls do not queue behind each other's fsyncs. A call whose
// ctx ends first returns ctx's error, as a request to an API server that
// timed out: its change may or may not survive a crash.
func (f *Fleet) finish(ctx context.Context, c change) error {
	if f.store == nil {
		return nil
	}
	if err := f.store.save(&f.st, c); err != nil {
		return err
	}
	upTo := f.store.seq
	if f.store.durable(upTo) {
		return nil
	}
	f.mu.Unlock()
	defer f.mu.Lock()
	return f.store.waitSync(ctx, upTo)
}

// ---- ClusterDriver ----

// AddNode registers the node, Ready, with its labels and the pods new nodes
// start with. Adding a node that exists changes nothing.
func (f *Fleet) AddNode(ctx context.Context, spec driver.NodeSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if spec.ClusterID == "" || spec.NodeName == "" {
		return errors.New("sim: add node: cluster ID and node name are required")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := nodeKey{spec.ClusterID, spec.NodeName}
	if _, ok := f.st.nodes[k]; ok {
		return f.finish(ctx, change{})
	}
	profile, templates := "custom", f.pods
	if templates == nil {
		p := defaultProfile(f.seed, spec.ClusterID, spec.NodeName)
		profile, templates = p.name, p.pods
	}
	n := &node{
		ClusterID:   spec.ClusterID,
		Name:        spec.NodeName,
		MachineID:   spec.MachineID,
		Class:       spec.Class,
		GPUs:        spec.GPUs,
		Profile:     profile,
		Labels:      maps.Clone(spec.Labels),
		Annotations: map[string]string{},
		AddedAt:     f.clock.Now(),
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for _, t := range templates {
		n.Pods = append(n.Pods, newPod(t))
	}
	f.st.nodes[k] = n
	return f.finish(ctx, changedNode(n, true))
}

// AddPod starts a pod on the node, as its kubelet would once the scheduler
// placed it there. Tests use it; a pod of that name already there is an
// error.
func (f *Fleet) AddPod(clusterID, nodeName string, t PodTemplate) error {
	ctx := context.Background()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("add pod to", clusterID, nodeName)
	if err != nil {
		return err
	}
	t.Namespace = cmp.Or(t.Namespace, "default")
	if t.Name == "" || t.TerminationGracePeriod < 0 {
		return fmt.Errorf("sim: add pod %s/%s: needs a name and a grace period >= 0", t.Namespace, t.Name)
	}
	if slices.ContainsFunc(n.Pods, func(p *pod) bool { return p.Namespace == t.Namespace && p.Name == t.Name }) {
		return fmt.Errorf("sim: add pod %s/%s: already on node %s", t.Namespace, t.Name, nodeName)
	}
	n.Pods = append(n.Pods, newPod(t))
	f.wake(clusterID, nodeName, time.Time{}) // a pod bound to a node that may be draining
	return f.finish(ctx, changedNode(n, true))
}

func newPod(t PodTemplate) *pod {
	p := &pod{Namespace: t.Namespace, Name: t.Name, TerminationGracePeriod: t.TerminationGracePeriod,
		ExitAfter: t.ExitAfter, DaemonSet: t.DaemonSet, ReadsDeadline: t.ReadsDeadline, External: t.External,
		GPUs: t.GPUs, Labels: t.Labels}
	if p.External {
		p.ExitAfter = NeverExits // until PodExited says otherwise
	}
	return p
}

// PodExited reports that an External pod's process ended now (as a
// kubelet reports a container's exit): the pod is gone, as Exited if it
// had been deleted, Completed if not. A pod already gone, or missing,
// changes nothing; a pod that is not External is an error.
func (f *Fleet) PodExited(clusterID, nodeName, namespace, name string) error {
	ctx := context.Background()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return f.finish(ctx, change{})
	}
	ns := cmp.Or(namespace, "default")
	i := slices.IndexFunc(n.Pods, func(p *pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		return f.finish(ctx, change{})
	}
	p := n.Pods[i]
	if !p.External {
		return fmt.Errorf("sim: pod %s/%s on %s is not External: its exit is simulated", ns, name, nodeName)
	}
	now := f.clock.Now()
	if p.state(now) == PodGone {
		return f.finish(ctx, change{})
	}
	p.GoneAt, p.End = now, PodExited
	if p.SIGTERMAt.IsZero() {
		p.End = PodCompleted
	}
	f.wakeWhenQuiet(n, now)
	return f.finish(ctx, changedNode(n, true))
}

// lookup returns the node or an error wrapping ErrNoNode.
func (f *Fleet) lookup(op, clusterID, nodeName string) (*node, error) {
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return nil, fmt.Errorf("%s node %s in cluster %s: %w", op, nodeName, clusterID, ErrNoNode)
	}
	return n, nil
}

// Load says whether the node runs no pod but DaemonSets' as of the
// clock's now and, for a busy node, the work at risk for the lost-work
// ledger: its GPUs since the node was added (the simulated fleet's pods
// start with their node and report no checkpoint). It tells nothing to
// weigh a reclaim by (LostGPUSeconds): busy nodes are alike to the
// allocator, which takes the youngest. A missing node is not known.
func (f *Fleet) Load(clusterID, nodeName string) domain.NodeLoad {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return domain.NodeLoad{}
	}
	now := f.clock.Now()
	for _, p := range n.Pods {
		if !p.DaemonSet && p.state(now) != PodGone {
			work := int64(n.GPUs) * int64(max(now.Sub(n.AddedAt), 0)/time.Second)
			return domain.NodeLoad{Known: true, WorkGPUSeconds: work}
		}
	}
	return domain.NodeLoad{Known: true, Idle: true}
}

// Running lists the node's pods, DaemonSets' aside, that have not gone
// as of the clock's now and hold GPUs (as the Kubernetes driver lists
// them), from when the node was added, with their template's labels. A
// missing node is not known.
func (f *Fleet) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return nil, false
	}
	now := f.clock.Now()
	var out []domain.Running
	for _, p := range n.Pods {
		if p.DaemonSet || p.GPUs <= 0 || p.state(now) == PodGone {
			continue
		}
		out = append(out, domain.Running{Key: p.Namespace + "/" + p.Name, Namespace: p.Namespace, Name: p.Name,
			Job: "pod/" + p.Namespace + "/" + p.Name, GPUs: p.GPUs, Labels: maps.Clone(p.Labels), Start: n.AddedAt})
	}
	return out, true
}

// ListWork lists the pods on the node that have not exited as of the
// clock's now. A missing node has no pods.
func (f *Fleet) ListWork(ctx context.Context, clusterID, nodeName string) ([]driver.Work, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []driver.Work
	if n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]; ok {
		now := f.clock.Now()
		// Told again at every ask, as Prepare: when the pods a drain waits
		// for are gone.
		f.wakeWhenQuiet(n, now)
		for _, p := range n.Pods {
			if p.state(now) == PodGone {
				continue
			}
			w := driver.Work{
				Namespace:     p.Namespace,
				Name:          p.Name,
				Grace:         p.TerminationGracePeriod,
				Stopping:      !p.SIGTERMAt.IsZero(),
				Support:       p.DaemonSet,
				ReadsDeadline: p.ReadsDeadline,
			}
			if w.Stopping {
				w.KillAt = p.SIGTERMAt.Add(p.Grace)
			}
			out = append(out, w)
		}
	}
	return out, f.finish(ctx, change{})
}

// Notify deletes the pod so that it is gone by by, with the API server's
// rules: a running pod gets SIGTERM now and is gone after its ExitAfter or
// its grace, whichever is first; a terminating pod's grace period can only
// be shortened (measured from its original SIGTERM); a zero or past by
// removes it at once. The grace is driver.GraceBy with the pod's own grace
// period and the clock read under the fleet's lock, so waiting for the
// lock cannot stretch it. A pod that is gone, or on a missing node, is not
// an error.
func (f *Fleet) Notify(ctx context.Context, clusterID, nodeName string, w driver.Work, by time.Time) error {
	return f.deletePod(ctx, clusterID, nodeName, w, by, func(p *pod, now time.Time) time.Duration {
		return driver.GraceBy(driver.Work{Grace: p.TerminationGracePeriod}, by, now)
	})
}

// deletePod deletes the pod with the grace worked out at now; a deletion
// with a deadline (by) first records it on a pod that reads its
// annotations, as the Kubernetes driver annotates it.
func (f *Fleet) deletePod(ctx context.Context, clusterID, nodeName string, dp driver.Work, by time.Time, grace func(*pod, time.Time) time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return f.finish(ctx, change{})
	}
	ns := cmp.Or(dp.Namespace, "default")
	i := slices.IndexFunc(n.Pods, func(p *pod) bool { return p.Namespace == ns && p.Name == dp.Name })
	if i < 0 {
		return f.finish(ctx, change{})
	}
	now := f.clock.Now()
	p := n.Pods[i]
	changed := false
	if p.ReadsDeadline && !by.IsZero() && p.Deadline.IsZero() && p.state(now) != PodGone {
		p.Deadline, changed = by, true
	}
	changed = p.delete(now, grace(p, now)) || changed
	if changed {
		f.wakeWhenQuiet(n, now)
	}
	return f.finish(ctx, changedNode(n, changed))
}

// Release removes the node and its pods. A missing node is not an error.
func (f *Fleet) Release(ctx context.Context, clusterID, nodeName string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := nodeKey{clusterID, nodeName}
	if _, ok := f.st.nodes[k]; !ok {
		return f.finish(ctx, change{})
	}
	if !marked(f.st.nodes[k]) {
		f.wake(clusterID, nodeName, time.Time{}) // deleted behind sparecap's back
	}
	delete(f.st.nodes, k)
	return f.finish(ctx, change{DeleteNodes: []nodeRef{{clusterID, nodeName}}})
}

// Health reports whether the node exists and since when it has not been
// Ready (see SetReady).
func (f *Fleet) Health(ctx context.Context, clusterID, nodeName string) (driver.NodeHealth, error) {
	if err := ctx.Err(); err != nil {
		return driver.NodeHealth{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.nodes[nodeKey{clusterID, nodeName}]
	if !ok {
		return driver.NodeHealth{Gone: true}, nil
	}
	return driver.NodeHealth{NotReadySince: n.NotReadySince, Class: n.Class}, nil
}

// SetClass changes the node's class and its labels to spec's in place, as
// the Kubernetes driver patches them: its pods keep running.
func (f *Fleet) SetClass(ctx context.Context, spec driver.NodeSpec) error {
	return f.changeNode(ctx, "set class of", spec.ClusterID, spec.NodeName, func(n *node) bool {
		changed := n.Class != spec.Class
		n.Class = spec.Class
		for k, v := range spec.Labels {
			if n.Labels[k] != v {
				n.Labels[k], changed = v, true
			}
		}
		return changed
	})
}

// SetReady stands in for a kubelet that stops (ready=false) or resumes
// reporting Ready. Tests use it.
func (f *Fleet) SetReady(clusterID, nodeName string, ready bool) error {
	ctx := context.Background()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("set ready on", clusterID, nodeName)
	if err != nil {
		return err
	}
	switch {
	case ready:
		n.NotReadySince = time.Time{}
	case n.NotReadySince.IsZero():
		n.NotReadySince = f.clock.Now()
	}
	f.wake(clusterID, nodeName, time.Time{})
	return f.finish(ctx, changedNode(n, true))
}

// Uncordon stands in for a tenant who runs kubectl uncordon and removes
// the node's taints. Tests use it.
func (f *Fleet) Uncordon(clusterID, nodeName string) error {
	ctx := context.Background()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("uncordon", clusterID, nodeName)
	if err != nil {
		return err
	}
	n.Unschedulable, n.Taints = false, nil
	f.wake(clusterID, nodeName, time.Time{}) // a drain puts its marks back
	return f.finish(ctx, changedNode(n, true))
}

// ---- MachineProvider ----
