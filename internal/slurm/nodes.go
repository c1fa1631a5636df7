package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// reasonPrefix starts every drain reason sparecap sets. Drains without it
// are someone else's: sparecap never clears or overwrites them.
const reasonPrefix = "sparecap:"

// FeatureManaged is the feature every sparecap node carries, beside its
// class (standard or preemptible) and its cluster's (ClusterFeature).
const FeatureManaged = "sparecap"

// Keys of the JSON object sparecap keeps in a node's Extra field.
const (
	extraDeadline = "sparecap.dev/deadline"
	extraCause    = "sparecap.dev/cause"
	extraNotice   = "sparecap.dev/notice"
	// extraPreemptAt: when the node's notice will come, its machine
	// being booked (RFC 3339); jobs read it with scontrol show node.
	extraPreemptAt = domain.AnnotationPreemptAt
)

// Features are the features every node of the class has, whatever its
// cluster (see NodeFeatures).
func Features(class domain.ComputeClass) []string { return []string{FeatureManaged, string(class)} }

// AddNode returns nil once the node's slurmd has registered with
// slurmctld (the machine's boot starts `slurmd -Z` with NodeConf), is
// responding and schedulable, and carries the features of its cluster and
// class; an error wrapping driver.ErrNotReady before that. sparecap never
// creates the node itself: its slurmd's registration does. A node of
// that name with another cluster's feature is never taken.
func (c *Cluster) AddNode(ctx context.Context, spec driver.NodeSpec) error {
	if err := c.check(spec.ClusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return err
	}
	n := s.nodes[spec.NodeName]
	if n == nil || c.ownership(n) != ours {
		// Adopting takes a node for this cluster: never from a view that
		// may predate what another cluster's slurmd registered with.
		if s, err = c.view(ctx, 0); err != nil {
			return err
		}
		n = s.nodes[spec.NodeName]
	}
	switch {
	case n == nil:
		return fmt.Errorf("node %s has not registered with slurmctld: %w", spec.NodeName, driver.ErrNotReady)
	case c.ownership(n) == theirs:
		return fmt.Errorf("node %s in slurmctld is another cluster's (features %s), not %s's: %w", spec.NodeName, n.Features, c.id, driver.ErrNotReady)
	case !n.responding():
		return fmt.Errorf("node %s is %s: %w", spec.NodeName, n.State, driver.ErrNotReady)
	}
	if err := c.adopt(ctx, n, specFeatures(spec)); err != nil {
		return err
	}
	c.setAdded(spec.NodeName, true)
	if n.drained() {
		return fmt.Errorf("node %s is drained (%s): %w", spec.NodeName, n.Reason, driver.ErrNotReady)
	}
	return nil
}

// NodeConf is what the machine's `slurmd -Z --conf` says of the node: its
// CPUs, memory, GPUs (of its GPU type: gres gpu:H100:8) and features, its
// cluster's and its GPU type among them, so the node is its cluster's from
// its registration. The machine provider's hook gets it.
func NodeConf(spec driver.NodeSpec, cpus, memoryMiB int) string {
	gres := fmt.Sprintf("gpu:%d", spec.GPUs)
	if featureName.MatchString(spec.GPUType) {
		gres = fmt.Sprintf("gpu:%s:%d", spec.GPUType, spec.GPUs)
	}
	s := fmt.Sprintf("Gres=%s Feature=%s", gres, strings.Join(specFeatures(spec), ","))
	if cpus > 0 {
		s = fmt.Sprintf("CPUs=%d ", cpus) + s
	}
	if memoryMiB > 0 {
		s = fmt.Sprintf("RealMemory=%d ", memoryMiB) + s
	}
	return s
}

// MarkDraining drains the node with a reason that starts "sparecap:" and
// names the cause and deadline, and writes the deadline and cause in its
// Extra field as JSON, in one call. A node someone else drained keeps
// their reason (it is drained all the same); only Extra is written. A node
// marked already costs nothing.
func (c *Cluster) MarkDraining(ctx context.Context, clusterID, nodeName string, m driver.Marks) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	args, err := c.marks(ctx, nodeName, m, c.opts.PollEvery)
	if err != nil || len(args) == 0 {
		return err
	}
	// Read the node again before writing: a drain the tenant set since
	// the last poll must not be overwritten. (Slurm has no compare-and-
	// set: a drain set between this read and the write is lost, a window
	// of one call.)
	if args, err = c.marks(ctx, nodeName, m, 0); err != nil || len(args) == 0 {
		return err
	}
	return c.updateNode(ctx, nodeName, args...)
}

// marks are the scontrol update arguments that would mark the node, as a
// view no older than maxAge shows it: none if it is marked already.
func (c *Cluster) marks(ctx context.Context, nodeName string, m driver.Marks, maxAge time.Duration) ([]string, error) {
	s, err := c.view(ctx, maxAge)
	if err != nil {
		return nil, err
	}
	n := c.own(ctx, s, nodeName)
	if n == nil {
		return nil, notFound("node " + nodeName)
	}
	x := parseExtra(n.Extra)
	deadline := m.Deadline.UTC().Format(time.RFC3339)
	reason := fmt.Sprintf("%s %s; deadline %s", reasonPrefix, m.Cause, deadline)
	var args []string
	if x[extraDeadline] != deadline || x[extraCause] != string(m.Cause) {
		x[extraDeadline], x[extraCause] = deadline, string(m.Cause)
		args = append(args, "extra="+x.String())
	}
	foreign := n.drained() && !n.ours() && n.Reason != ""
	if foreign {
		c.keptDrain(nodeName, n.Reason)
	}
	if !foreign && (!n.drained() || n.Reason != reason) {
		args = append(args, "state=DRAIN", "reason="+reason)
	}
	return args, nil
}

// keptDrain says once per node and reason, in the node's events, that a
// drain someone else set was kept.
func (c *Cluster) keptDrain(nodeName, reason string) {
	c.tend.mu.Lock()
	key := nodeName + "\x00" + reason
	seen := c.tend.kept[key]
	c.tend.kept[key] = true
	c.tend.mu.Unlock()
	if h := c.hook(); !seen && h.Note != nil {
		h.Note(driver.NodeNote{ClusterID: c.id, NodeName: nodeName, Reason: domain.ReasonDrainReasonKept,
			Message: fmt.Sprintf("node %s was drained already by someone else (reason %q); sparecap leaves that reason as it is and wrote its deadline in the node's Extra field", nodeName, reason)})
	}
}

// Release removes the node from slurmctld. A node with jobs still on it
// (past its deadline, or lost) is set DOWN first, which requeues them at
// once; the delete is then tried again on the cleanup's next pass if
// slurmctld still counts it busy. A missing node, or one that is not this
// cluster's, is not an error: there is nothing of this cluster's to
// remove.
func (c *Cluster) Release(ctx context.Context, clusterID, nodeName string) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return err
	}
	n := c.own(ctx, s, nodeName)
	if n == nil {
		return nil
	}
	if len(s.active(nodeName)) > 0 && n.State != "down" {
		if err := c.down(ctx, nodeName, "released with jobs still on it"); err != nil {
			return err
		}
	}
	_, err = c.run.run(ctx, "scontrol", "delete", "nodename="+nodeName)
	c.invalidate()
	switch {
	case err == nil, says(err, "invalid node name"), says(err, "not found"):
		c.setAdded(nodeName, false)
		return nil
	case says(err, "busy"):
		if n.State != "down" {
			c.down(ctx, nodeName, "released while busy")
		}
		return fmt.Errorf("delete node %s: slurmctld still counts it busy; tried again later: %w", nodeName, err)
	}
	return fmt.Errorf("delete node %s: %w", nodeName, err)
}

// down sets the node DOWN: Slurm requeues its requeueable jobs at once.
func (c *Cluster) down(ctx context.Context, nodeName, why string) error {
	return c.updateNode(ctx, nodeName, "state=DOWN", "reason="+reasonPrefix+" "+why)
}

// Health reports what slurmctld and the node's slurmd say: gone when
// slurmctld has no such node of this cluster's; not ready since the first
// sign its slurmd stopped answering, or since slurmctld set it DOWN; lost
// once the driver set it DOWN for that (see probe).
func (c *Cluster) Health(ctx context.Context, clusterID, nodeName string) (driver.NodeHealth, error) {
	if err := c.check(clusterID); err != nil {
		return driver.NodeHealth{}, err
	}
	s, err := c.view(ctx, 2*c.opts.PollEvery)
	if err != nil {
		return driver.NodeHealth{}, err
	}
	n := c.own(ctx, s, nodeName)
	if n == nil {
		return driver.NodeHealth{Gone: true}, nil
	}
	h := driver.NodeHealth{Class: classOf(n)}
	since, lost := c.tend.probeState(nodeName)
	if !since.IsZero() {
		h.NotReadySince = since
	}
	if !n.responding() && h.NotReadySince.IsZero() {
		h.NotReadySince = time.Unix(n.ReasonChangedAt, 0)
	}
	if lost != "" {
		h.Lost = lost
	}
	return h, nil
}

func (c *Cluster) updateNode(ctx context.Context, nodeName string, args ...string) error {
	_, err := c.run.run(ctx, "scontrol", append([]string{"update", "nodename=" + nodeName}, args...)...)
	c.invalidate()
	if says(err, "invalid node name") {
		return notFound("node " + nodeName)
	}
	if err != nil {
		return fmt.Errorf("update node %s: %w", nodeName, err)
	}
	return nil
}

// extra is the JSON object in a node's Extra field; text that is not one
// is kept under "text".
type extra map[string]string

func parseExtra(s string) extra {
	x := extra{}
	if s == "" {
		return x
	}
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		var any map[string]any
		if json.Unmarshal([]byte(s), &any) == nil {
			for k, v := range any {
				x[k] = fmt.Sprint(v)
			}
			return x
		}
		return extra{"text": s}
	}
	return x
}

func (x extra) String() string {
	b, _ := json.Marshal(maps.Clone(x))
	return string(b)
}

// active lists the jobs with processes on the node.
func (s *snapshot) active(node string) []*jobInfo {
	var out []*jobInfo
	for _, j := range s.onNode[node] {
		if j.active() {
			out = append(out, j)
		}
	}
	return out
}
