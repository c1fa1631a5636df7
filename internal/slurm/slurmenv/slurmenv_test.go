package slurmenv

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestNodesJoinAndRunJobs: two dynamic nodes join on their own addresses
// and each runs a job with an srun step on itself.
func TestNodesJoinAndRunJobs(t *testing.T) {
	e, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, n := range []string{"gpu-a", "gpu-b"} {
		if _, err := e.StartNode(ctx, NodeSpec{Name: n, GPUs: 2, Features: []string{"sparecap", "preemptible"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		out, _ := e.Run(ctx, "sinfo", "-h", "-N", "-p", "main", "-o", "%N %t")
		return strings.Count(out, "idle") == 2, out
	})
	for _, n := range []string{"gpu-a", "gpu-b"} {
		if _, err := e.Run(ctx, "sbatch", "-w", n, "--gres=gpu:1", "-o", e.Dir+"/"+n+".out", "--wrap", "srun hostname"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		out, _ := e.Run(ctx, "squeue", "-h")
		return strings.TrimSpace(out) == "", out
	})
}

func waitFor(t *testing.T, d time.Duration, f func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		ok, s := f()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("timed out: %s", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
