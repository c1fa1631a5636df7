package slurm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
)

// jobGrace is the grace a Slurm job asks for: none of its own, so it has
// until the drain's deadline (GraceBy cuts it there).
const jobGrace = 24 * time.Hour

// ListWork lists the jobs with work on the node: the ones running there
// (a multi-node job once, on each of its nodes), and the noticed ones that
// ended and that sparecap has yet to requeue. A node that is not this
// cluster's has none.
func (c *Cluster) ListWork(ctx context.Context, clusterID, nodeName string) ([]driver.Work, error) {
	if err := c.check(clusterID); err != nil {
		return nil, err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return nil, err
	}
	if c.own(ctx, s, nodeName) == nil {
		return nil, nil
	}
	var out []driver.Work
	for _, j := range s.work(nodeName) {
		out = append(out, c.work(j))
	}
	return out, nil
}

func work(j *jobInfo) driver.Work {
	w := driver.Work{Namespace: cmp.Or(j.Account, j.User), Name: j.Name, UID: uid(j), Grace: jobGrace}
	if m, ok := jobMark(j); ok {
		w.Stopping, w.KillAt = true, m.By
	}
	return w
}

// work is j as a unit of work; a job whose signal failed after its mark
// was written is not stopping yet, so it is notified again.
func (c *Cluster) work(j *jobInfo) driver.Work {
	w := work(j)
	if w.Stopping && c.tend.unsignalled(w.UID) {
		w.Stopping = false
	}
	return w
}

// uid identifies a job and tells one run of it from the next (a requeued
// job keeps its ID): "ID.RESTARTS".
func uid(j *jobInfo) string { return fmt.Sprintf("%d.%d", j.ID, j.Restarts) }

// jobID is the job ID in a unit of work's UID.
func jobID(w driver.Work) string {
	id, _, _ := strings.Cut(w.UID, ".")
	return id
}

// Notify gives the job its notice: its mark (what sparecap promised it,
// so an exit after the notice is requeued) and SIGTERM: to its srun
// steps' tasks when it has any, else to its batch shell (noticeArgs). A job noticed already with a deadline no later than by is
// left alone: a multi-node job is noticed once, as a whole. A zero or past
// by ends it now (requeued if it may be, else cancelled). The job's end at
// by itself is the poll's (tendJobs): requeued or cancelled at by minus
// KillWait, so its SIGKILL lands by by.
//
// The mark is written first because it is what brings the job back; it is
// bounded, and if it fails the signal goes out all the same and the mark
// is kept in memory and written by the next poll.
func (c *Cluster) Notify(ctx context.Context, clusterID, nodeName string, w driver.Work, by time.Time) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return err
	}
	j := s.job(jobID(w))
	if j == nil || !j.active() || w.UID != uid(j) || !slices.Contains(j.on, nodeName) || c.own(ctx, s, nodeName) == nil {
		return nil // gone, a later run of it, or not on this cluster's node
	}
	m, marked := jobMark(j)
	now := c.opts.Clock.Now()
	if marked && !by.IsZero() && !m.By.After(by) && by.After(now) && !c.tend.unsignalled(uid(j)) {
		return nil
	}
	if !marked {
		m = mark{Node: nodeName, Run: j.Restarts}
	}
	m.By = by
	if by.IsZero() || !by.After(now) {
		m.By = now
		return c.end(ctx, j, m)
	}
	c.writeMark(ctx, j, m)
	if _, err := c.run.run(ctx, "scancel", c.noticeArgs(ctx, j.ID)...); err != nil {
		if says(err, "already completing or completed") || says(err, "invalid job id") {
			return nil
		}
		c.tend.setUnsignalled(uid(j), true)
		return fmt.Errorf("notify job %d on node %s: %w", j.ID, nodeName, err)
	}
	c.tend.setUnsignalled(uid(j), false)
	c.invalidate()
	return nil
}

// end ends a job now: requeued (SIGTERM, SIGKILL after KillWait) if it may
// be, cancelled otherwise.
func (c *Cluster) end(ctx context.Context, j *jobInfo, m mark) error {
	m.Killed = true
	c.writeMark(ctx, j, m)
	id := strconv.FormatInt(j.ID, 10)
	var err error
	if j.Requeue && j.BatchFlag {
		if _, err = c.run.run(ctx, "scontrol", "requeue", id); err == nil {
			c.requeued(ctx, j, m)
		}
	} else {
		_, err = c.run.run(ctx, "scancel", "--full", id)
	}
	if err != nil && !says(err, "already completing or completed") && !says(err, "invalid job id") && !says(err, "pending execution") {
		return fmt.Errorf("end job %d: %w", j.ID, err)
	}
	c.invalidate()
	return nil
}

// writeMark writes m on j; a failure is logged and the mark kept for the
// next poll to write.
func (c *Cluster) writeMark(ctx context.Context, j *jobInfo, m mark) {
	_, foreign, _ := parseMark(j.AdminComment)
	text := comment(foreign, m)
	if _, err := c.run.run(ctx, "scontrol", "update", "jobid="+strconv.FormatInt(j.ID, 10), "AdminComment="+text); err != nil {
		c.opts.Log.Warn("cannot write a job's notice mark; kept for the next poll", "cluster", c.id, "job", j.ID, "err", err)
		c.tend.pend(j.ID, text)
		return
	}
	c.tend.done(j.ID)
	c.invalidate()
}

// PostNotice posts n where the tenant reads it: on the node, in its Extra
// field (JSON, beside the deadline); on a job, after its mark in its
// AdminComment. Slurm has no events. Nothing is posted for a node that is
// not this cluster's.
func (c *Cluster) PostNotice(ctx context.Context, clusterID, nodeName string, w *driver.Work, n driver.Notice) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	s, err := c.view(ctx, c.opts.PollEvery)
	if err != nil {
		return err
	}
	text := noticeText(n)
	node := c.own(ctx, s, nodeName)
	if w == nil {
		if node == nil {
			return notFound("node " + nodeName)
		}
		x := parseExtra(node.Extra)
		if x[extraNotice] == text {
			return nil
		}
		x[extraNotice] = text
		return c.updateNode(ctx, nodeName, "extra="+x.String())
	}
	j := s.job(jobID(*w))
	if j == nil || (node == nil && s.nodes[nodeName] != nil) {
		return nil // gone, or another cluster's node's
	}
	m, foreign, _ := parseMark(j.AdminComment)
	if m.Notice == text {
		return nil
	}
	m.Notice = text
	if _, err := c.run.run(ctx, "scontrol", "update", "jobid="+jobID(*w), "AdminComment="+comment(foreign, m)); err != nil {
		return fmt.Errorf("post a notice on job %s: %w", jobID(*w), err)
	}
	c.invalidate()
	return nil
}

func (s *snapshot) job(id string) *jobInfo {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil {
		return nil
	}
	return s.byID[n]
}

// noticeText is a notice as a Slurm field carries it:
// "[Warning] Reason: message".
func noticeText(n driver.Notice) string {
	kind := "Normal"
	if n.Warning {
		kind = "Warning"
	}
	return "[" + kind + "] " + n.Reason + ": " + n.Message
}

// noticeArgs are scancel's arguments for the notice of job id. A job with
// srun steps has them signalled, not its batch step: srun answers a
// SIGTERM by killing its tasks at once ("forcing job termination"), and a
// shell that is not exec'd ends the job on it, so --full would turn the
// notice into the end of the work. A job with no steps (the batch shell
// is the work, or exec'd it) is signalled with --full, as without it the
// batch shell gets nothing. When the steps cannot be listed within
// stepsWait (a slurmctld slow to answer), --full: the listing must not
// hold the notice up.
func (c *Cluster) noticeArgs(ctx context.Context, id int64) []string {
	job := strconv.FormatInt(id, 10)
	ctx, cancel := context.WithTimeout(ctx, stepsWait)
	defer cancel()
	out, err := c.run.run(ctx, "squeue", "--steps", "--noheader", "--format=%i", "--jobs="+job)
	if err == nil && hasSrunStep(string(out)) {
		return []string{"--signal=TERM", job}
	}
	return []string{"--signal=TERM", "--full", job}
}

// stepsWait bounds the listing of a noticed job's steps.
const stepsWait = 2 * time.Second

// hasSrunStep reports whether squeue's list of a job's steps ("5.0",
// "5.batch", "5.extern") holds one srun launched: a numbered one.
func hasSrunStep(steps string) bool {
	for _, line := range strings.Fields(steps) {
		_, step, ok := strings.Cut(line, ".")
		if _, err := strconv.Atoi(step); ok && err == nil {
			return true
		}
	}
	return false
}
