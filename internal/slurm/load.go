package slurm

import (
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// maxLoadAge is how old the last poll may be for Load to tell from it: a
// job started since is not in it, and an idle node could be a busy one.
const maxLoadAge = time.Minute

// Load says, from the last poll (the controller never waits for one while
// it plans), what the node runs: idle when no job is active on it; else
// the gang of its job that spans most nodes (a multi-node job stops
// whole), the work since its jobs started (Slurm does not tell
// checkpoints) on the node's GPUs, and its jobs' highest priority.
// Unknown before a recent poll.
func (c *Cluster) Load(clusterID, nodeName string) domain.NodeLoad {
	if c.check(clusterID) != nil {
		return domain.NodeLoad{}
	}
	c.mu.Lock()
	s := c.snap
	c.mu.Unlock()
	now := c.opts.Clock.Now()
	if s == nil || now.Sub(s.at) > maxLoadAge {
		return domain.NodeLoad{}
	}
	if _, ok := s.nodes[nodeName]; !ok {
		return domain.NodeLoad{}
	}
	return loadOf(s.onNode[nodeName], now)
}

// loadOf is what a node running jobs runs at now.
func loadOf(jobs []*jobInfo, now time.Time) domain.NodeLoad {
	l := domain.NodeLoad{Known: true, Idle: true}
	widest := 1
	for _, j := range jobs {
		if !j.active() {
			continue
		}
		l.Idle = false
		if start := time.Unix(j.StartTime, 0); j.StartTime > 0 && now.After(start) {
			l.LostGPUSeconds += domain.GPUStep * min(int64(now.Sub(start)/time.Second), 365*24*3600)
			l.WorkGPUSeconds = l.LostGPUSeconds
		}
		l.Priority = max(l.Priority, j.Priority)
		if len(j.on) > widest {
			widest, l.Gang = len(j.on), "slurm/"+strconv.FormatInt(j.ID, 10)
		}
	}
	return l
}
