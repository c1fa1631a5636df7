package slurm

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// tendState is what the poll keeps between passes: marks it has yet to
// write, jobs whose signal failed, and the probes of each node's slurmd.
type tendState struct {
	mu    sync.Mutex
	marks map[int64]string // AdminComment to write, by job
	unsig map[string]bool  // by run (uid)
	probe map[string]*probeState
	kept  map[string]bool // foreign drains reported (keptDrain)
}

type probeState struct {
	// seen: a probe got through once; only then do failures count (a
	// host that cannot reach the nodes at all decides nothing).
	seen     bool
	failures int
	since    time.Time
	lost     string
}

func (t *tendState) init() {
	t.marks, t.unsig, t.probe, t.kept = map[int64]string{}, map[string]bool{}, map[string]*probeState{}, map[string]bool{}
}

func (t *tendState) pend(job int64, text string) {
	t.mu.Lock()
	t.marks[job] = text
	t.mu.Unlock()
}

func (t *tendState) done(job int64) {
	t.mu.Lock()
	delete(t.marks, job)
	t.mu.Unlock()
}

func (t *tendState) pending() map[int64]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int64]string, len(t.marks))
	for k, v := range t.marks {
		out[k] = v
	}
	return out
}

func (t *tendState) unsignalled(run string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unsig[run]
}

func (t *tendState) setUnsignalled(run string, v bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v {
		t.unsig[run] = true
	} else {
		delete(t.unsig, run)
	}
}

func (t *tendState) probeState(node string) (time.Time, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.probe[node]; p != nil {
		return p.since, p.lost
	}
	return time.Time{}, ""
}

// tendJobs keeps the promises of the marks on the jobs: the marks not
// written yet are written; a noticed job that ended is requeued (once),
// its requeue hold released and its node list cleared of the node it
// left; a noticed job still running at its deadline minus KillWait is
// ended (requeued or cancelled), so its SIGKILL lands by the deadline.
func (c *Cluster) tendJobs(ctx context.Context, s *snapshot) {
	for id, text := range c.tend.pending() {
		if _, err := c.run.run(ctx, "scontrol", "update", "jobid="+strconv.FormatInt(id, 10), "AdminComment="+text); err == nil || says(err, "invalid job id") {
			c.tend.done(id)
		}
	}
	now := c.opts.Clock.Now()
	for _, j := range s.jobs {
		m, ok := jobMark(j)
		if !ok {
			continue
		}
		switch {
		case awaitsRequeue(j):
			c.requeueEnded(ctx, j, m)
		case j.active() && !m.Killed && !now.Before(m.By.Add(-c.killWait)):
			if err := c.end(ctx, j, m); err != nil {
				c.opts.Log.Warn("cannot end a job at its deadline", "cluster", c.id, "job", j.ID, "err", err)
			}
		}
	}
}

// requeueEnded requeues a noticed job that ended: Slurm counts a job that
// checkpointed and exited 0 after its SIGTERM as COMPLETED and would never
// run it again.
func (c *Cluster) requeueEnded(ctx context.Context, j *jobInfo, m mark) {
	if _, err := c.run.run(ctx, "scontrol", "requeue", strconv.FormatInt(j.ID, 10)); err != nil {
		c.opts.Log.Warn("cannot requeue a job that ended after its notice", "cluster", c.id, "job", j.ID, "err", err)
		return
	}
	c.requeued(ctx, j, m)
	c.invalidate()
}

// requeued finishes a requeue sparecap made: the mark says so, the hold
// Slurm puts on a requeued job (its begin time, now + the credential
// window + 1 s, 121 s by default) is released, and a node list that names
// the reclaimed node is cleared, so the job is not left pending on a node
// that is gone. Each is best effort: the requeue is what matters.
func (c *Cluster) requeued(ctx context.Context, j *jobInfo, m mark) {
	if h := c.hook(); h.Note != nil && !m.Requeued {
		why := "it ended after its notice (" + j.State + ")"
		if m.Killed {
			why = "its deadline came while it ran"
		}
		h.Note(driver.NodeNote{ClusterID: c.id, NodeName: m.Node, Reason: domain.ReasonJobRequeued,
			Message: fmt.Sprintf("job %d (%s/%s) was requeued: %s; it is eligible to run again at once", j.ID, cmp.Or(j.Account, j.User), j.Name, why)})
	}
	m.Requeued = true
	id := strconv.FormatInt(j.ID, 10)
	_, foreign, _ := parseMark(j.AdminComment)
	args := []string{"update", "jobid=" + id, "AdminComment=" + comment(foreign, m), "StartTime=now"}
	if j.RequiredNodes != "" {
		for _, n := range expandHostlist(j.RequiredNodes) {
			if n == m.Node {
				args = append(args, "ReqNodeList=")
				break
			}
		}
	}
	if _, err := c.run.run(ctx, "scontrol", args...); err != nil {
		c.opts.Log.Warn("cannot release a requeued job's hold", "cluster", c.id, "job", j.ID, "err", err)
	}
}

// probe connects to each sparecap node's slurmd. One that fails
// Options.ProbeFailures times in a row is set DOWN, so Slurm requeues its
// jobs now rather than after SlurmdTimeout (300 s by default), and
// reported lost (Health). A probe that succeeds clears the count; failures
// count only on a node a probe reached before.
func (c *Cluster) probe(ctx context.Context, s *snapshot) {
	var wg sync.WaitGroup
	type result struct {
		node string
		ok   bool
	}
	results := make(chan result, len(s.nodes))
	for _, n := range s.nodes {
		if !managedNode(n) || n.Address == "" || n.Port == 0 || n.State == "future" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: time.Second}
			conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(n.Address, strconv.Itoa(n.Port)))
			if err == nil {
				conn.Close()
			}
			results <- result{n.Name, err == nil}
		}()
	}
	wg.Wait()
	close(results)
	now := c.opts.Clock.Now()
	var downs []string
	c.tend.mu.Lock()
	for r := range results {
		p := c.tend.probe[r.node]
		if r.ok {
			c.tend.probe[r.node] = &probeState{seen: true}
			continue
		}
		if p == nil || !p.seen {
			continue
		}
		if p.failures == 0 {
			p.since = now
		}
		p.failures++
		if p.failures == c.opts.ProbeFailures && p.lost == "" {
			downs = append(downs, r.node)
		}
	}
	for name := range c.tend.probe {
		if _, ok := s.nodes[name]; !ok {
			delete(c.tend.probe, name)
		}
	}
	c.tend.mu.Unlock()
	for _, name := range downs {
		why := "its slurmd stopped answering"
		if err := c.down(ctx, name, why); err != nil {
			c.opts.Log.Warn("cannot set a lost node DOWN", "cluster", c.id, "node", name, "err", err)
			continue
		}
		c.tend.mu.Lock()
		if p := c.tend.probe[name]; p != nil {
			p.lost = why + " (" + strconv.Itoa(c.opts.ProbeFailures) + " probes in a row); sparecap set it DOWN, so Slurm requeued its jobs at once"
		}
		c.tend.mu.Unlock()
		if h := c.hook(); h.NodeChanged != nil {
			h.NodeChanged()
		}
	}
}

// managedNode: a node sparecap added (it has the feature "sparecap").
func managedNode(n *nodeInfo) bool {
	for _, f := range splitTop(n.Features) {
		if f == FeatureManaged {
			return true
		}
	}
	return false
}
