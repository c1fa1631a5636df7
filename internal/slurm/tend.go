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
	// lastDial: when the nodes' slurmds were last probed.
	lastDial time.Time
	// joined: a node of the cluster became usable since the last nudge.
	joined bool
	// release: when to release the hold of each job sparecap requeued.
	release map[int64]time.Time
}

type probeState struct {
	// seen: a probe got through once; only then do failures count (a
	// host that cannot reach the nodes at all decides nothing).
	seen     bool
	failures int
	since    time.Time // the first sign it stopped answering
	why      string    // the sign
	lost     string    // set once it is DOWN: what Health reports
}

func (t *tendState) init() {
	t.marks, t.unsig, t.probe, t.kept = map[int64]string{}, map[string]bool{}, map[string]*probeState{}, map[string]bool{}
	t.release = map[int64]time.Time{}
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
		if !ok || !c.keeps(s, m) {
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

// keeps: the promise of mark m is this cluster's to keep. A mark names
// the node of the notice, not the cluster: one that names another
// cluster's node is that cluster's. One whose node is gone is kept (a
// restarted sparecap keeps its promises after the node went).
func (c *Cluster) keeps(s *snapshot, m mark) bool {
	n := s.nodes[m.Node]
	return n == nil || c.ownership(n) != theirs
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
// window + 1 s, 121 s by default) is to be released releaseAfter from now
// (see releaseDue), and a node list that names the reclaimed node is
// cleared, so the job is not left pending on a node that is gone. Each is
// best effort: the requeue is what matters.
func (c *Cluster) requeued(ctx context.Context, j *jobInfo, m mark) {
	if h := c.hook(); h.Note != nil && !m.Requeued {
		why := "it ended after its notice (" + j.State + ")"
		if m.Killed {
			why = "its deadline came while it ran"
		}
		h.Note(driver.NodeNote{ClusterID: c.id, NodeName: m.Node, Reason: domain.ReasonJobRequeued,
			Message: fmt.Sprintf("job %d (%s/%s) was requeued: %s; it is eligible to run again in %s", j.ID, cmp.Or(j.Account, j.User), j.Name, why, releaseAfter)})
	}
	m.Requeued = true
	id := strconv.FormatInt(j.ID, 10)
	_, foreign, _ := parseMark(j.AdminComment)
	c.tend.mu.Lock()
	c.tend.release[j.ID] = c.opts.Clock.Now().Add(releaseAfter)
	c.tend.mu.Unlock()
	args := []string{"update", "jobid=" + id, "AdminComment=" + comment(foreign, m)}
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

// probe finds the sparecap nodes whose slurmd stopped answering and sets
// them DOWN, so Slurm requeues their jobs now rather than after
// SlurmdTimeout (300 s by default), and reports them lost (Health). A
// node is found so when slurmctld marks it not responding (it pings every
// SlurmdTimeout/3), or, with Options.ProbeEvery, when a TCP connection to
// its slurmd from sparecap's host fails Options.ProbeFailures times in a
// row (counted only on a node a probe reached before: a host that cannot
// reach the nodes decides nothing).
func (c *Cluster) probe(ctx context.Context, s *snapshot) {
	now := c.opts.Clock.Now()
	dialled := c.dial(ctx, s, now)
	var downs []string
	c.tend.mu.Lock()
	for _, n := range s.nodes {
		if !c.managed(n) || n.State == "future" || n.State == "down" {
			continue
		}
		p := c.tend.probe[n.Name]
		if p == nil {
			p = &probeState{}
			c.tend.probe[n.Name] = p
		}
		ok, tried := dialled[n.Name]
		switch {
		case p.lost != "":
		case n.flag("NOT_RESPONDING"):
			p.since, p.why = cmp.Or(p.since, now), "slurmctld marks it not responding"
			downs = append(downs, n.Name)
		case tried && ok:
			p.seen, p.failures, p.since = true, 0, time.Time{}
		case tried && p.seen:
			if p.failures == 0 {
				p.since = now
			}
			p.failures++
			if p.failures >= c.opts.ProbeFailures {
				p.why = fmt.Sprintf("its slurmd did not answer %d probes in a row", p.failures)
				downs = append(downs, n.Name)
			}
		}
	}
	for name := range c.tend.probe {
		if _, ok := s.nodes[name]; !ok {
			delete(c.tend.probe, name)
		}
	}
	c.tend.mu.Unlock()
	for _, name := range downs {
		c.lose(ctx, name)
	}
}

// lose sets a node whose slurmd stopped answering DOWN and reports it.
func (c *Cluster) lose(ctx context.Context, name string) {
	c.tend.mu.Lock()
	why := c.tend.probe[name].why
	c.tend.mu.Unlock()
	if err := c.down(ctx, name, "lost: "+why); err != nil {
		c.opts.Log.Warn("cannot set a lost node DOWN", "cluster", c.id, "node", name, "err", err)
		return
	}
	c.tend.mu.Lock()
	if p := c.tend.probe[name]; p != nil {
		p.lost = why + "; sparecap set it DOWN, so Slurm requeued its jobs at once"
	}
	c.tend.mu.Unlock()
	c.wake(name)
}

// dial connects to the slurmd of each of the cluster's nodes once every
// Options.ProbeEvery (never when it is zero) and says which answered. A
// probe costs a line in the slurmd's log ("Zero Bytes were transmitted"),
// which is why it is off by default.
//
// It dials the address of a node with the cluster's feature only, and
// only on the cluster's SlurmdPort, never on the port the node's record
// reports: the records are the tenant's to write (scontrol create
// NodeAddr=... Port=...), and the control plane must not connect wherever
// they say, once a second, a port scan on the tenant's behalf. slurmctld
// itself reaches a dynamic node on SlurmdPort whatever its record's Port
// (NOTES.md section 5), so a node whose record says another port is dialed
// there too.
func (c *Cluster) dial(ctx context.Context, s *snapshot, now time.Time) map[string]bool {
	c.tend.mu.Lock()
	due := c.opts.ProbeEvery > 0 && !now.Before(c.tend.lastDial.Add(c.opts.ProbeEvery))
	if due {
		c.tend.lastDial = now
	}
	c.tend.mu.Unlock()
	out := map[string]bool{}
	if !due {
		return out
	}
	port := strconv.Itoa(c.slurmdPort)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		if !c.managed(n) || n.Address == "" || n.State == "future" || n.State == "down" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: time.Second}
			conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(n.Address, port))
			if err == nil {
				conn.Close()
			}
			mu.Lock()
			out[n.Name] = err == nil
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
