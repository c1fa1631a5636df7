package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// snapshot is what one poll read of the cluster.
type snapshot struct {
	at    time.Time // when its read began
	nodes map[string]*nodeInfo
	jobs  []*jobInfo
	// onNode and byID index jobs, built as it is read: a node's work and
	// a job are looked up once per notice, on clusters of many jobs.
	onNode map[string][]*jobInfo
	byID   map[int64]*jobInfo
}

// nodeInfo is a node as `sinfo --json` shows it.
type nodeInfo struct {
	Name            string   `json:"name"`
	Address         string   `json:"address"`
	Port            int      `json:"port"`
	State           string   `json:"state"`
	Flags           []string `json:"state_flags"`
	Reason          string   `json:"reason"`
	ReasonChangedAt int64    `json:"reason_changed_at"`
	Features        string   `json:"features"`
	Extra           string   `json:"extra"`
	Gres            string   `json:"gres"`
	CPUs            int      `json:"cpus"`
}

func (n *nodeInfo) flag(f string) bool { return slices.Contains(n.Flags, f) }

// drained: no new jobs go to the node.
func (n *nodeInfo) drained() bool {
	return n.flag("DRAIN") || n.State == "down" || n.State == "drained" || n.State == "draining"
}

// responding: slurmctld hears from its slurmd.
func (n *nodeInfo) responding() bool {
	return n.State != "down" && n.State != "future" && n.State != "unknown" && !n.flag("NOT_RESPONDING") &&
		!n.flag("POWERED_DOWN") && !n.flag("FAIL")
}

// ours: the drain on the node is sparecap's.
func (n *nodeInfo) ours() bool { return strings.HasPrefix(n.Reason, reasonPrefix) }

// jobInfo is a job as `squeue --json` shows it.
type jobInfo struct {
	ID            int64  `json:"job_id"`
	User          string `json:"user_name"`
	Account       string `json:"account"`
	Name          string `json:"name"`
	State         string `json:"job_state"`
	Nodes         string `json:"nodes"`
	Requeue       bool   `json:"requeue"`
	Restarts      int    `json:"restart_cnt"`
	AdminComment  string `json:"admin_comment"`
	RequiredNodes string `json:"required_nodes"`
	EligibleTime  int64  `json:"eligible_time"`
	StartTime     int64  `json:"start_time"`
	Priority      int64  `json:"priority"`
	BatchFlag     bool   `json:"batch_flag"`
	// TresAlloc is what the job holds on all its nodes, "cpu=2,...,gres/gpu=8"
	// (GPUs only where accounting counts gres/gpu); TresPerNode what it
	// asked per node, "gres:gpu:1" (22.05) or "gres/gpu:1".
	TresAlloc   string `json:"tres_alloc_str"`
	TresPerNode string `json:"tres_per_node"`
	Resources   *struct {
		Allocated []struct {
			Name string `json:"nodename"`
		} `json:"allocated_nodes"`
	} `json:"job_resources"`

	on []string
}

// active: the job has processes (or is ending them) on its nodes.
func (j *jobInfo) active() bool {
	switch j.State {
	case "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED", "SIGNALING", "STAGE_OUT":
		return true
	}
	return false
}

// finished: the job ended and is not queued to run again.
func (j *jobInfo) finished() bool {
	switch j.State {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE":
		return true
	}
	return false
}

// nodeList works out the nodes the job has (or had) work on, once, as
// the snapshot is read: a snapshot is shared and never written after.
func (j *jobInfo) nodeList() []string {
	var on []string
	if j.Resources != nil && len(j.Resources.Allocated) > 0 {
		for _, a := range j.Resources.Allocated {
			on = append(on, a.Name)
		}
	} else {
		on = expandHostlist(j.Nodes)
	}
	return on
}

// read runs one poll, begun at at: the nodes and the jobs, both at once.
func (c *Cluster) read(ctx context.Context, at time.Time) (*snapshot, error) {
	type res struct {
		out []byte
		err error
	}
	nodes := make(chan res, 1)
	go func() {
		out, err := c.run.run(ctx, "sinfo", "--json")
		nodes <- res{out, err}
	}()
	jobsOut, jobsErr := c.run.run(ctx, "squeue", "--json", "--states=all")
	n := <-nodes
	if n.err != nil {
		return nil, fmt.Errorf("read the nodes: %w", n.err)
	}
	if jobsErr != nil {
		return nil, fmt.Errorf("read the jobs: %w", jobsErr)
	}
	return parseSnapshot(at, n.out, jobsOut)
}

// parseSnapshot reads sinfo --json and squeue --json output into a
// snapshot, with its indexes.
func parseSnapshot(at time.Time, nodesJSON, jobsJSON []byte) (*snapshot, error) {
	var ns struct {
		Nodes  []*nodeInfo `json:"nodes"`
		Errors []jsonError `json:"errors"`
	}
	if err := json.Unmarshal(nodesJSON, &ns); err != nil {
		return nil, fmt.Errorf("read the nodes: sinfo --json: %w", err)
	}
	var js struct {
		Jobs   []*jobInfo  `json:"jobs"`
		Errors []jsonError `json:"errors"`
	}
	if err := json.Unmarshal(jobsJSON, &js); err != nil {
		return nil, fmt.Errorf("read the jobs: squeue --json: %w", err)
	}
	// With slurmctld unreachable, sinfo and squeue exit 0 with an error
	// and no nodes or jobs: that is not an empty cluster (its nodes would
	// look gone, their work ended), it is no answer.
	if len(ns.Errors) > 0 {
		return nil, fmt.Errorf("read the nodes: sinfo --json: %s", ns.Errors[0])
	}
	if len(js.Errors) > 0 {
		return nil, fmt.Errorf("read the jobs: squeue --json: %s", js.Errors[0])
	}
	s := &snapshot{at: at, nodes: make(map[string]*nodeInfo, len(ns.Nodes)), jobs: js.Jobs,
		onNode: map[string][]*jobInfo{}, byID: make(map[int64]*jobInfo, len(js.Jobs))}
	for _, j := range js.Jobs {
		j.on = j.nodeList()
		s.byID[j.ID] = j
		for _, n := range j.on {
			s.onNode[n] = append(s.onNode[n], j)
		}
	}
	for _, n := range ns.Nodes {
		s.nodes[n.Name] = n
	}
	return s, nil
}

// jsonError is an entry of the errors of Slurm's JSON output.
type jsonError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	Errno       int    `json:"errno"`
	ErrorNumber int    `json:"error_number"`
}

func (e jsonError) String() string {
	s := e.Error
	if e.Description != "" {
		s = e.Description + ": " + s
	}
	n := e.Errno
	if n == 0 {
		n = e.ErrorNumber
	}
	return fmt.Sprintf("%s (errno %d)", s, n)
}

// view returns a snapshot whose read began no earlier than maxAge before
// the call, reading the cluster if the last one is older. One read runs
// at a time, and callers in the meantime share the next one: fifty nodes
// marked at once cost a read or two, not fifty.
func (c *Cluster) view(ctx context.Context, maxAge time.Duration) (*snapshot, error) {
	since := c.opts.Clock.Now().Add(-maxAge)
	for {
		c.mu.Lock()
		s := c.snap
		if s != nil && !s.at.Before(since) {
			c.mu.Unlock()
			return s, nil
		}
		if wait := c.refreshing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.refreshing = done
		c.mu.Unlock()
		s, err := c.read(ctx, c.opts.Clock.Now())
		c.mu.Lock()
		c.refreshing = nil
		prev := c.snap
		if err == nil {
			c.snap = s
			c.noteFirst(s)
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		c.changed(prev, s)
		if prev != nil {
			c.noteJoined(prev, s)
		}
		return s, nil
	}
}

// invalidate makes the next view read the cluster again (after a write).
func (c *Cluster) invalidate() {
	c.mu.Lock()
	if c.snap != nil {
		s := *c.snap
		s.at = time.Time{}
		c.snap = &s
	}
	c.mu.Unlock()
}

// changed tells the controller what changed between two polls, node by
// node: what a node's steps wait for. AddNode waits for a node to
// register, respond, be adopted (a node may join without the cluster's
// feature, which AddNode gives it) and not be drained; a drain for its
// last job to end; a lost node for it to stop responding or go. So a node
// of the cluster's, or one it may adopt, is woken when it registers or
// starts or stops responding; one of the cluster's also when it is
// adopted, drained or resumed, or draining and its last job ended, and
// when it goes or stops being the cluster's.
func (c *Cluster) changed(prev, next *snapshot) {
	if prev == nil {
		return
	}
	for name, p := range prev.nodes {
		if n, ok := next.nodes[name]; c.managed(p) && (!ok || !c.managed(n)) {
			c.wake(name)
		}
	}
	for name, n := range next.nodes {
		own := c.ownership(n)
		if own == theirs {
			continue
		}
		p, seen := prev.nodes[name]
		switch {
		case !seen, p.responding() != n.responding():
		case own != ours:
			continue
		case !c.managed(p), p.drained() != n.drained():
		case n.drained() && len(next.work(name)) == 0 && len(prev.work(name)) > 0:
		default:
			continue
		}
		c.wake(name)
	}
}

// wake tells the controller that something node name's step waits for
// changed: that node's turn runs now.
func (c *Cluster) wake(name string) {
	if h := c.hook(); h.Wake != nil {
		h.Wake(c.id, name, time.Time{})
	}
}

// Tells: the driver's poll wakes a node whenever what its step waits for
// changes (see changed).
func (c *Cluster) Tells(string) bool { return true }

// work lists the jobs that count as work on the node: active ones, and
// noticed ones that ended and wait for their requeue.
func (s *snapshot) work(node string) []*jobInfo {
	var out []*jobInfo
	for _, j := range s.onNode[node] {
		if j.active() || awaitsRequeue(j) {
			out = append(out, j)
		}
	}
	return out
}

// loop polls the cluster and keeps the jobs' promises (tend) until Close.
func (c *Cluster) loop() {
	defer close(c.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-c.stop; cancel() }()
	for {
		s, err := c.view(ctx, c.opts.PollEvery/2)
		if err != nil && ctx.Err() == nil {
			c.opts.Log.Warn("cannot read the Slurm cluster", "cluster", c.id, "err", err)
		}
		if err == nil {
			c.tendJobs(ctx, s)
			c.releaseDue(ctx)
			c.nudge(ctx, s)
			c.probe(ctx, s)
		}
		select {
		case <-c.stop:
			return
		case <-c.opts.Clock.After(c.opts.PollEvery):
		}
	}
}

// expandHostlist expands a Slurm hostlist ("a-[1-3,5],b") into names.
func expandHostlist(s string) []string {
	var out []string
	for _, part := range splitTop(s) {
		open := strings.IndexByte(part, '[')
		if open < 0 || !strings.HasSuffix(part, "]") {
			if part != "" {
				out = append(out, part)
			}
			continue
		}
		prefix, body := part[:open], part[open+1:len(part)-1]
		for _, r := range strings.Split(body, ",") {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				out = append(out, prefix+lo)
				continue
			}
			var a, b int
			if _, err := fmt.Sscanf(lo, "%d", &a); err != nil {
				continue
			}
			if _, err := fmt.Sscanf(hi, "%d", &b); err != nil {
				continue
			}
			for i := a; i <= b; i++ {
				out = append(out, fmt.Sprintf("%s%0*d", prefix, len(lo), i))
			}
		}
	}
	return out
}

// splitTop splits at the commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
