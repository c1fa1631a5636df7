package slurm

import (
	"context"
	"slices"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// classes are the class features a node may carry, one at a time.
var classes = []domain.ComputeClass{domain.Standard, domain.Preemptible}

// classOf is the class a node's features say, or "" if they name none or
// both.
func classOf(n *nodeInfo) domain.ComputeClass {
	fs := splitTop(n.Features)
	var found domain.ComputeClass
	for _, c := range classes {
		if slices.Contains(fs, string(c)) {
			if found != "" {
				return ""
			}
			found = c
		}
	}
	return found
}

// SetClass swaps the node's class feature for spec.Class's, keeping its
// other features, in one scontrol update. Its jobs run on: features only
// steer where new jobs go (a job's --constraint).
func (c *Cluster) SetClass(ctx context.Context, spec driver.NodeSpec) error {
	if err := c.check(spec.ClusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, 0)
	if err != nil {
		return err
	}
	n := c.own(ctx, s, spec.NodeName)
	if n == nil {
		return notFound("node " + spec.NodeName)
	}
	have := slices.DeleteFunc(splitTop(n.Features), func(f string) bool { return f == "" })
	want := slices.DeleteFunc(slices.Clone(have), func(f string) bool {
		return f != string(spec.Class) && slices.Contains(classes, domain.ComputeClass(f))
	})
	for _, f := range specFeatures(spec) {
		if !slices.Contains(want, f) {
			want = append(want, f)
		}
	}
	if slices.Equal(have, want) {
		return nil
	}
	list := strings.Join(want, ",")
	return c.updateNode(ctx, spec.NodeName, "AvailableFeatures="+list, "ActiveFeatures="+list)
}
