package slurm

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Which nodes of a slurmctld are this cluster's. The controllers of two
// clusters name their nodes alike (gpu-dp-1, ...), so a name proves
// nothing: a node is this cluster's when it carries the cluster's feature
// (ClusterFeature). AddNode gives it to the node its controller asked for
// when it first sees it registered (unless the node has another
// cluster's). No call of this cluster's driver acts on another node,
// whatever its name, and the poll (probes, WorkGone, NodeChanged) takes
// only nodes with the feature.
//
// Nodes sparecap added before nodes carried their cluster's feature have
// "sparecap" and their class only. Such a node, if slurmctld had it when
// the driver started (its first poll), is adopted (given the feature) by
// the first call of this cluster's controller that names it (Health,
// MarkDraining, ...): the controller names only nodes it made for the
// cluster, so after an upgrade its nodes are not reported lost. One that
// registered later is a new machine's, which only AddNode adopts: the call
// that names the node the controller asked for.

// clusterFeaturePrefix starts every cluster feature.
const clusterFeaturePrefix = FeatureManaged + "-"

// ClusterFeature is the feature that ties a node to its cluster:
// "sparecap-" and the cluster's ID, any character a Slurm feature cannot
// hold (a feature list is comma-separated; constraints use & | [ ] ( ) *
// and :) written as '_'.
func ClusterFeature(clusterID string) string {
	return clusterFeaturePrefix + strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, clusterID)
}

// NodeFeatures are the features a node of the cluster and class joins
// with: Features and the cluster's feature.
func NodeFeatures(clusterID string, class domain.ComputeClass) []string {
	return append(Features(class), ClusterFeature(clusterID))
}

// specFeatures are the features of the node spec describes: its class's,
// its cluster's and its GPU type (a job asks for one with -C H100).
func specFeatures(spec driver.NodeSpec) []string {
	fs := NodeFeatures(spec.ClusterID, spec.Class)
	if featureName.MatchString(spec.GPUType) && !slices.Contains(fs, spec.GPUType) {
		fs = append(fs, spec.GPUType)
	}
	return fs
}

// featureName is a GPU type Slurm takes as a feature and a gres type
// as it is (no character its constraint expressions or gres strings
// give a meaning).
var featureName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ownership is what a node is to this cluster.
type ownership int

const (
	unmanaged ownership = iota // no sparecap feature: the tenant's own
	ours                       // this cluster's feature
	theirs                     // another cluster's feature
	legacy                     // "sparecap" without a cluster feature: from before them
)

func (c *Cluster) ownership(n *nodeInfo) ownership {
	fs := splitTop(n.Features)
	switch {
	case slices.Contains(fs, ClusterFeature(c.id)):
		return ours
	case slices.ContainsFunc(fs, func(f string) bool { return strings.HasPrefix(f, clusterFeaturePrefix) }):
		return theirs
	case slices.Contains(fs, FeatureManaged):
		return legacy
	}
	return unmanaged
}

// managed: the node carries this cluster's feature (what the poll takes).
func (c *Cluster) managed(n *nodeInfo) bool { return c.ownership(n) == ours }

// own returns the node of that name if it is this cluster's, giving it
// the cluster's feature if it lacks it and is adoptable (this cluster's
// controller names it); nil if there is none or it is not this
// cluster's.
func (c *Cluster) own(ctx context.Context, s *snapshot, name string) *nodeInfo {
	n := s.nodes[name]
	if n == nil {
		return nil
	}
	switch c.ownership(n) {
	case ours:
		return n
	case legacy, unmanaged:
		if c.adoptable(name) {
			c.adopt(ctx, n, nil)
			return n
		}
	}
	return nil
}

// noteFirst records, from the driver's first poll, the nodes from before
// cluster features that slurmctld had then. c.mu is held: no call sees
// the first snapshot before this.
func (c *Cluster) noteFirst(s *snapshot) {
	if c.before != nil {
		return
	}
	c.before = map[string]bool{}
	for name, n := range s.nodes {
		if c.ownership(n) == legacy {
			c.before[name] = true
		}
	}
}

// adoptable: a node without a cluster feature is this cluster's: slurmctld
// had it when the driver started, or AddNode adopted it (a snapshot read
// before AddNode wrote the feature does not show it yet).
func (c *Cluster) adoptable(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.before[name] || c.added[name]
}

// setAdded records that AddNode adopted the node, or, with false, that
// the node is gone.
func (c *Cluster) setAdded(name string, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v {
		c.added[name] = true
	} else {
		delete(c.added, name)
		delete(c.before, name)
	}
}

// adopt adds the cluster's feature, and want, to the node's features. A
// failure is logged: the next call that names the node tries again.
func (c *Cluster) adopt(ctx context.Context, n *nodeInfo, want []string) error {
	have := slices.DeleteFunc(splitTop(n.Features), func(f string) bool { return f == "" })
	all := slices.Clone(have)
	for _, f := range append(slices.Clone(want), ClusterFeature(c.id)) {
		if !slices.Contains(all, f) {
			all = append(all, f)
		}
	}
	if len(all) == len(have) {
		return nil
	}
	list := strings.Join(all, ",")
	err := c.updateNode(ctx, n.Name, "AvailableFeatures="+list, "ActiveFeatures="+list)
	if err != nil {
		c.opts.Log.Warn("cannot give a node its cluster's feature; tried again when it is named", "cluster", c.id, "node", n.Name, "err", err)
	}
	return err
}
