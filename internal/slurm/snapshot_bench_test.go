package slurm

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSnapshot is the driver's per-poll cost on one big Slurm
// cluster: parsing sinfo --json and squeue --json (two running jobs per
// node and as many finished ones still on record) and indexing them, then
// one node's work looked up. Fleet sizes: 12,000 and 100,000 GPUs of 8-GPU
// nodes in one cluster.
func BenchmarkSnapshot(b *testing.B) {
	for _, gpus := range []int{12000, 100000} {
		nodes := gpus / 8
		nj, jj := syntheticJSON(nodes)
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			b.SetBytes(int64(len(nj) + len(jj)))
			for range b.N {
				s, err := parseSnapshot(time.Now(), nj, jj)
				if err != nil {
					b.Fatal(err)
				}
				if len(s.work("n-7")) != 2 {
					b.Fatalf("work %d", len(s.work("n-7")))
				}
			}
		})
	}
}

func syntheticJSON(nodes int) ([]byte, []byte) {
	type node struct {
		Name     string   `json:"name"`
		Address  string   `json:"address"`
		Port     int      `json:"port"`
		State    string   `json:"state"`
		Flags    []string `json:"state_flags"`
		Features string   `json:"features"`
		Extra    string   `json:"extra"`
		Gres     string   `json:"gres"`
		CPUs     int      `json:"cpus"`
	}
	type job struct {
		ID           int64  `json:"job_id"`
		User         string `json:"user_name"`
		Name         string `json:"name"`
		State        string `json:"job_state"`
		Nodes        string `json:"nodes"`
		Requeue      bool   `json:"requeue"`
		AdminComment string `json:"admin_comment"`
		BatchFlag    bool   `json:"batch_flag"`
	}
	var ns []node
	var js []job
	for i := range nodes {
		name := fmt.Sprintf("n-%d", i)
		ns = append(ns, node{Name: name, Address: "10.0.0.1", Port: 6818, State: "mixed", Flags: []string{"DYNAMIC_NORM"},
			Features: "sparecap,preemptible", Gres: "gpu:8", CPUs: 96})
		for k := range 4 {
			state := "RUNNING"
			if k >= 2 {
				state = "COMPLETED"
			}
			js = append(js, job{ID: int64(i*4 + k), User: "alice", Name: "train", State: state, Nodes: name, Requeue: true, BatchFlag: true})
		}
	}
	nj, _ := json.Marshal(map[string]any{"nodes": ns})
	jj, _ := json.Marshal(map[string]any{"jobs": js})
	return nj, jj
}

// BenchmarkPollCompare is what each poll does with two snapshots of a
// cluster of 100,000 GPUs (12,500 nodes, none changed, so every node is
// looked at): the wakes alone (changed), and the wakes with the look for
// a node that joined (noteJoined), side by side.
func BenchmarkPollCompare(b *testing.B) {
	c := &Cluster{id: "c1"}
	features := "sparecap,preemptible," + ClusterFeature("c1")
	snap := func() *snapshot {
		s := &snapshot{nodes: map[string]*nodeInfo{}, onNode: map[string][]*jobInfo{}}
		for i := range 100000 / 8 {
			name := fmt.Sprintf("n-%d", i)
			s.nodes[name] = &nodeInfo{Name: name, State: "mixed", Flags: []string{"DYNAMIC_NORM"}, Features: features}
		}
		return s
	}
	prev, next := snap(), snap()
	b.Run("changed", func(b *testing.B) {
		for range b.N {
			c.changed(prev, next)
		}
	})
	b.Run("changed+noteJoined", func(b *testing.B) {
		for range b.N {
			c.changed(prev, next)
			c.noteJoined(prev, next)
		}
	})
}
