package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// nodeCount is the standard nodes of a cluster, ready and expected.
type nodeCount struct{ ready, expected int }

// defaultGPUsPerNode is the node size assumed before any node exists.
const defaultGPUsPerNode = 8

func standardNodes(cl *apiv1.Cluster) nodeCount {
	var nc nodeCount
	perNode := 0
	for _, n := range cl.GPUWorkerNodes {
		if !strings.EqualFold(n.ComputeClass, "standard") {
			continue
		}
		if n.NumGPUs > 0 {
			perNode = n.NumGPUs
		}
		if isReady(n) {
			nc.ready++
		}
	}
	if perNode == 0 {
		perNode = defaultGPUsPerNode
	}
	nc.expected = (cl.NumGPUs + perNode - 1) / perNode
	return nc
}

func isReady(n apiv1.Node) bool { return strings.EqualFold(n.Status, "ready") }

// clusterReady: the cluster's standard nodes are up. Preemptible capacity is
// not waited for: the target is not guaranteed.
func clusterReady(cl *apiv1.Cluster) bool { return cl.Status == "Ready" }

// clusterSettled: Ready, and no node is coming up or going away, and no
// preemptible capacity is on its way (a target unmet for lack of capacity
// or fair share may stay unmet for hours, so it does not hold up the wait).
func clusterSettled(cl *apiv1.Cluster) bool {
	if !clusterReady(cl) {
		return false
	}
	for _, n := range cl.GPUWorkerNodes {
		if !isReady(n) {
			return false
		}
	}
	if u := cl.TargetUnfulfilled; u != nil && u.Reason == "Provisioning" {
		return false
	}
	return true
}

func progressLine(cl *apiv1.Cluster) string {
	std := standardNodes(cl)
	line := fmt.Sprintf("status %s, standard nodes %d/%d ready, preemptible GPUs %d/%d allocated",
		cl.Status, std.ready, std.expected, cl.AllocatedPreemptibleGPUs, cl.TargetPreemptibleGPUs)
	if u := cl.TargetUnfulfilled; u != nil && u.Reason != "" {
		line += " (" + u.Reason + ")"
	}
	var busy []string
	for _, n := range cl.GPUWorkerNodes {
		if !isReady(n) {
			busy = append(busy, n.NodeName+" "+n.Status)
		}
	}
	if len(busy) > 0 {
		line += "; " + strings.Join(busy, ", ")
	}
	return line
}

// waitCluster polls the cluster until done says so, printing a progress line
// on stderr whenever it changes.
func (s *state) waitCluster(cmd *cobra.Command, c *client.Client, cl *apiv1.Cluster, timeout time.Duration, goal string, done func(*apiv1.Cluster) bool) (*apiv1.Cluster, error) {
	id := cl.ClusterID
	p := s.newProgress(cmd)
	last := cl
	err := s.poll(cmd, timeout, func(first bool) (bool, error) {
		if !first {
			got, err := c.GetCluster(cmd.Context(), id)
			if err != nil {
				return false, p.transient(err)
			}
			last = got
		}
		p.line(progressLine(last))
		return done(last), nil
	})
	if errors.Is(err, errTimeout) {
		return nil, fmt.Errorf("timed out after %s waiting for cluster %s to be %s (last seen: %s)", timeout, id, goal, progressLine(last))
	}
	if err != nil {
		return nil, fmt.Errorf("wait for cluster %s: %w", id, err)
	}
	return last, nil
}

// waitGone polls until the cluster is 404.
func (s *state) waitGone(cmd *cobra.Command, c *client.Client, cl *apiv1.Cluster, timeout time.Duration) error {
	id := cl.ClusterID
	if id == "" {
		return errors.New("server returned no cluster_id to wait for")
	}
	p := s.newProgress(cmd)
	last := cl
	err := s.poll(cmd, timeout, func(first bool) (bool, error) {
		if !first {
			got, err := c.GetCluster(cmd.Context(), id)
			if client.IsNotFound(err) {
				p.line("cluster gone")
				return true, nil
			}
			if err != nil {
				return false, p.transient(err)
			}
			last = got
		}
		p.line(fmt.Sprintf("status %s, %d nodes left", last.Status, len(last.GPUWorkerNodes)))
		return false, nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("timed out after %s waiting for cluster %s to be deleted (status %s, %d nodes left)", timeout, id, last.Status, len(last.GPUWorkerNodes))
	}
	if err != nil {
		return fmt.Errorf("wait for cluster %s to be deleted: %w", id, err)
	}
	return nil
}
