package slurm

import (
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
)

// Running lists, from the last poll, the jobs active on the node (like
// Load, unknown before a recent poll).
func (c *Cluster) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	if c.check(clusterID) != nil {
		return nil, false
	}
	c.mu.Lock()
	s := c.snap
	c.mu.Unlock()
	if s == nil || c.opts.Clock.Now().Sub(s.at) > maxLoadAge {
		return nil, false
	}
	if _, ok := s.nodes[nodeName]; !ok {
		return nil, false
	}
	return runningOf(s.onNode[nodeName]), true
}

// runningOf is the active jobs among jobs. A requeued job keeps its ID
// (its Job, so a run is one across its requeues) but runs again: its
// restart count tells the runs apart (Key). Its GPUs on the node are its
// allocated GPUs over its nodes; 0 (the whole node) when squeue does not
// say.
func runningOf(jobs []*jobInfo) []domain.Running {
	var out []domain.Running
	for _, j := range jobs {
		if !j.active() {
			continue
		}
		id := strconv.FormatInt(j.ID, 10)
		r := domain.Running{Key: id + "." + strconv.Itoa(j.Restarts), Name: bound.Text(j.Name, maxText), Job: id,
			Account: bound.Text(j.Account, maxText), GPUs: gpusOf(j)}
		if j.User != "" {
			r.Labels = map[string]string{"user": bound.Text(j.User, maxText)}
		}
		if j.StartTime > 0 {
			r.Start = time.Unix(j.StartTime, 0).UTC()
		}
		out = append(out, r)
	}
	return out
}

// maxText bounds a job's name, account and user: the tenant's.
const maxText = 200

// gpusOf is the GPUs job j holds on each of its nodes: its allocated
// TRES over its nodes, else what it asked per node; 0 when neither says.
func gpusOf(j *jobInfo) int {
	if n := gpusPerNode(j.TresAlloc, len(j.on)); n > 0 {
		return n
	}
	return askedGPUs(j.TresPerNode)
}

// askedGPUs reads the GPUs of a per-node TRES request: "gres:gpu:2",
// "gres/gpu:2", "gres:gpu:a100:2", "gpu:2"; a GPU request without a
// count is one.
func askedGPUs(tres string) int {
	for _, f := range strings.Split(tres, ",") {
		f = strings.TrimPrefix(strings.TrimPrefix(f, "gres:"), "gres/")
		parts := strings.Split(f, ":")
		if parts[0] != "gpu" {
			continue
		}
		if len(parts) == 1 {
			return 1
		}
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil || n <= 0 {
			return 0
		}
		return min(n, 1024)
	}
	return 0
}

// gpusPerNode reads "gres/gpu=N" of a TRES string, over nodes; 0 when
// absent or unreadable.
func gpusPerNode(tres string, nodes int) int {
	for _, f := range strings.Split(tres, ",") {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != "gres/gpu" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || nodes <= 0 {
			return 0
		}
		return min(n/nodes, 1024)
	}
	return 0
}
