package slurm

import (
	"context"
	"time"
)

// Announce puts when the node's notice will come (its machine is booked)
// in the node's Extra, under sparecap.dev/preempt-at (RFC 3339), where a
// job reads it ahead with `scontrol show node`; a zero at takes it away.
// A node that already says it costs no call. A courtesy: an error is
// returned for the caller to report, and changes nothing of the notice.
func (c *Cluster) Announce(ctx context.Context, clusterID, nodeName string, at time.Time) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return err
	}
	node := c.own(ctx, s, nodeName)
	if node == nil {
		return notFound("node " + nodeName)
	}
	x := parseExtra(node.Extra)
	want := ""
	if !at.IsZero() {
		want = at.UTC().Format(time.RFC3339)
	}
	if x[extraPreemptAt] == want {
		return nil
	}
	if want == "" {
		delete(x, extraPreemptAt)
	} else {
		x[extraPreemptAt] = want
	}
	return c.updateNode(ctx, nodeName, "extra="+x.String())
}
