package slurm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/slurm/slurmenv"
)

// fanoutNodes is the size of the benchmark's reclaim.
const fanoutNodes = 50

// operatorScript is what an operator without sparecap runs at a mass
// reclaim: node by node, drain it and SIGTERM its jobs.
const operatorScript = `for n in "$@"; do
  scontrol update nodename="$n" state=DRAIN reason="reclaimed"
  ids=$(squeue -h -w "$n" -o %A)
  [ -n "$ids" ] && scancel --signal=TERM --full $ids
done`

// BenchmarkSlurmNoticeFanOut: 50 preemptible Slurm nodes, each running a
// job, reclaimed at once. It reports the time until every job has had its
// SIGTERM and every node is drained: sparecap (the controller, from the
// target's change) against the operator's script above, each on a Slurm of
// its own, side by side in one run.
func BenchmarkSlurmNoticeFanOut(b *testing.B) {
	for range b.N {
		script := scriptFanOut(b)
		ours := sparecapFanOut(b)
		b.ReportMetric(ours.Seconds(), "sparecap-s")
		b.ReportMetric(script.Seconds(), "script-s")
		b.ReportMetric(ours.Seconds()/script.Seconds(), "ratio")
	}
}

// sparecapFanOut reclaims fanoutNodes preemptible nodes through the
// controller.
func sparecapFanOut(b *testing.B) time.Duration {
	f := newFixture(b, fixtureConfig{machines: fanoutNodes + 2, window: 5 * time.Minute})
	f.createCluster("c1", 8, 8*fanoutNodes)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 2*time.Minute)
	nodes := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, fanoutNodes, 3*time.Minute)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	trails := startJobs(b, f.env, names)
	start := time.Now()
	f.setPreemptible("c1", 0)
	return waitFanOut(b, f.env, names, trails, start)
}

// scriptFanOut does the same reclaim with the operator's script.
func scriptFanOut(b *testing.B) time.Duration {
	e, err := slurmenv.Start(slurmenv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var names []string
	for i := range fanoutNodes {
		name := fmt.Sprintf("script-pre-%d", i+1)
		if _, err := e.StartNode(context.Background(), slurmenv.NodeSpec{Name: name, GPUs: 2, Features: []string{"sparecap", "preemptible"}}); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	trails := startJobs(b, e, names)
	start := time.Now()
	cmd := exec.Command("bash", append([]string{"-c", operatorScript, "script"}, names...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.Conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("operator script: %v\n%s", err, out)
	}
	return waitFanOut(b, e, names, trails, start)
}

// startJobs runs one job that records its SIGTERM on each node, and waits
// until all run.
func startJobs(b *testing.B, e *slurmenv.Env, nodes []string) map[string]trail {
	trails := map[string]trail{}
	dir := b.TempDir()
	for _, n := range nodes {
		tr := trail(dir + "/" + n)
		trails[n] = tr
		body := fmt.Sprintf("trap 'echo term@$(date +%%s.%%N) >> %s' TERM\necho start >> %s\nwhile :; do sleep 0.2; done", tr, tr)
		if _, err := e.Run(context.Background(), "sbatch", "-w", n, "-o", "/dev/null", "--gres=gpu:1", "--requeue", "--wrap", body); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, n := range nodes {
		for trails[n].count("start") == 0 {
			if time.Now().After(deadline) {
				b.Fatalf("the job on %s did not start", n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return trails
}

// waitFanOut waits until every job had its SIGTERM and every node is
// drained, and returns how long after start the last of both came.
func waitFanOut(b *testing.B, e *slurmenv.Env, nodes []string, trails map[string]trail, start time.Time) time.Duration {
	var mu sync.Mutex
	drainedAt := map[string]time.Time{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		states := drainStates(b, e)
		now := time.Now()
		mu.Lock()
		for _, n := range nodes {
			if _, ok := drainedAt[n]; !ok && (states[n] || !slices.Contains(keys(states), n)) {
				drainedAt[n] = now
			}
		}
		done := len(drainedAt) == len(nodes)
		mu.Unlock()
		for _, n := range nodes {
			done = done && len(trails[n].terms()) > 0
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not every job had its SIGTERM and every node drained in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var last time.Time
	for _, n := range nodes {
		last = maxTime(last, trails[n].terms()[0], drainedAt[n])
	}
	return last.Sub(start)
}

// drainStates says of each node whether it is drained (or draining).
func drainStates(b *testing.B, e *slurmenv.Env) map[string]bool {
	out, err := e.Run(context.Background(), "sinfo", "-h", "-N", "-p", "main", "-o", "%N %t")
	if err != nil {
		b.Fatal(err)
	}
	s := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			s[f[0]] = strings.HasPrefix(f[1], "drain") || strings.HasPrefix(f[1], "drng")
		}
	}
	return s
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
