package slurm

import (
	"context"
	"strconv"
	"time"
)

// Slurm tries its pending jobs when something happens to a job (one is
// submitted, ends or is updated) and otherwise at its periodic pass
// (SchedulerParameters sched_interval, 60 s by default). A node that
// joins, or is resumed, is not such an event: a job sparecap requeued at
// a reclaim, waiting for the node that refills the target, would wait on
// it idle until the next pass. So when a node of the cluster becomes
// usable, the job sparecap requeued that has waited longest is released
// again (StartTime=now, as at its requeue): one update, after which
// slurmctld tries every pending job, not only that one.

// usable: jobs may start on the node.
func (n *nodeInfo) usable() bool { return n.responding() && !n.drained() }

// noteJoined notes, between two polls, a node of this cluster that became
// usable; the poll's next pass nudges (see nudge).
func (c *Cluster) noteJoined(prev, next *snapshot) {
	for name, n := range next.nodes {
		p := prev.nodes[name]
		// Usable before with the same features (so the same owner): no
		// join, told without parsing the features (a poll of 12,500 nodes
		// looks at each).
		if !n.usable() || p != nil && p.usable() && p.Features == n.Features || c.ownership(n) != ours {
			continue
		}
		if p == nil || !p.usable() || c.ownership(p) != ours {
			c.tend.mu.Lock()
			c.tend.joined = true
			c.tend.mu.Unlock()
			return
		}
	}
}

// nudge releases again, once a node joined, the job sparecap requeued
// that has waited longest and is eligible to run: its begin time is not
// in the future, so the release changes nothing but starts a pass (a
// later begin time, the tenant's, is left alone). A failure is logged;
// the periodic pass still comes.
func (c *Cluster) nudge(ctx context.Context, s *snapshot) {
	c.tend.mu.Lock()
	joined := c.tend.joined
	c.tend.joined = false
	c.tend.mu.Unlock()
	if !joined {
		return
	}
	j := c.waitingRequeued(s, c.opts.Clock.Now())
	if j == nil {
		return
	}
	if _, err := c.run.run(ctx, "scontrol", "update", "jobid="+strconv.FormatInt(j.ID, 10), "StartTime=now"); err != nil {
		c.opts.Log.Warn("cannot ask slurmctld to try a requeued job on a node that joined; it waits for its next pass",
			"cluster", c.id, "job", j.ID, "err", err)
	}
}

// waitingRequeued is the oldest pending job of this cluster's that
// sparecap requeued and that may run at now; nil if there is none.
func (c *Cluster) waitingRequeued(s *snapshot, now time.Time) *jobInfo {
	var oldest *jobInfo
	for _, j := range s.jobs {
		m, _, ok := parseMark(j.AdminComment)
		if !ok || !m.Requeued || j.State != "PENDING" || j.Restarts != m.Run+1 || !c.keeps(s, m) ||
			time.Unix(j.EligibleTime, 0).After(now) {
			continue
		}
		if oldest == nil || j.ID < oldest.ID {
			oldest = j
		}
	}
	return oldest
}

// releaseAfter is how long after its requeue a job's hold is released.
// slurmd revokes a job's credential when the job is killed, and refuses
// a launch whose credential is no newer, to the second, than that: a job
// released at once could be started again within that second on a node
// it ran on (the rerun of a multi-node job, on the node it kept), and end
// at launch, exit 1, never requeued. Two seconds put the rerun's
// credential past the kill's second.
const releaseAfter = 2 * time.Second

// releaseDue releases the holds that are due (StartTime=now: the update
// also starts slurmctld's pass, so the job runs at once where it can). A
// job released, or whose release failed, is forgotten: Slurm's own hold
// ends by itself. A sparecap that restarts in between forgets them too.
func (c *Cluster) releaseDue(ctx context.Context) {
	now := c.opts.Clock.Now()
	var due []int64
	c.tend.mu.Lock()
	for id, at := range c.tend.release {
		if !now.Before(at) {
			due = append(due, id)
			delete(c.tend.release, id)
		}
	}
	c.tend.mu.Unlock()
	for _, id := range due {
		if _, err := c.run.run(ctx, "scontrol", "update", "jobid="+strconv.FormatInt(id, 10), "StartTime=now"); err != nil && !says(err, "invalid job id") {
			c.opts.Log.Warn("cannot release a requeued job's hold", "cluster", c.id, "job", id, "err", err)
		}
	}
}
