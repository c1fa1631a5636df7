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
			Account: bound.Text(j.Account, maxText), GPUs: gpusPerNode(j.TresAlloc, len(j.on))}
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
