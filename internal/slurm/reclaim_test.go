package slurm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// trail is a file a job appends its life to: "start_restart=N_node=X",
// "term" (or "term@UNIXTIME" from a job that ignores it), "exit".
type trail string

func newTrail(t *testing.T) trail {
	return trail(filepath.Join(t.TempDir(), "trail"))
}

func (tr trail) lines() []string {
	b, _ := os.ReadFile(string(tr))
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func (tr trail) count(prefix string) int {
	n := 0
	for _, l := range tr.lines() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// script is a batch script that records its starts and its SIGTERM, and
// on SIGTERM waits onTerm seconds and exits 0 (a checkpoint); with
// ignore, it ignores SIGTERM.
func (tr trail) script(onTerm float64, ignore bool) string {
	trap := fmt.Sprintf(`trap 'echo term >> %[1]s; sleep %.1[2]f; echo exit >> %[1]s; exit 0' TERM`, tr, onTerm)
	if ignore {
		trap = fmt.Sprintf(`trap 'echo term@$(date +%%s.%%N) >> %s' TERM`, tr)
	}
	return fmt.Sprintf("%s\necho start_restart=${SLURM_RESTART_COUNT:-0}_node=$SLURMD_NODENAME >> %s\nwhile :; do sleep 0.2; done", trap, tr)
}

func waitTrail(t *testing.T, tr trail, prefix string, n int, within time.Duration) {
	t.Helper()
	eventually(t, within, func() error {
		if got := tr.count(prefix); got < n {
			return fmt.Errorf("%d %q in the job's trail %v, want %d", got, prefix, tr.lines(), n)
		}
		return nil
	})
}

// TestReclaimedJobCheckpointsIsRequeuedAndComesBack is the reclaim of a
// preemptible Slurm node whose job cooperates: the node is drained with
// sparecap's reason, the job's batch shell gets SIGTERM, it checkpoints
// and exits 0 (Slurm records it COMPLETED), the node goes early, the job
// is requeued exactly once with its hold released, and it runs again,
// told it is a rerun, when the target is refilled: at once, not at
// slurmctld's next periodic pass (here 10 minutes away), as Slurm does not
// try pending jobs when a node joins.
func TestReclaimedJobCheckpointsIsRequeuedAndComesBack(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 3, window: time.Minute, schedInterval: 10 * time.Minute})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	tr := newTrail(t)
	id := submit(t, f.env, job{Name: "train", Script: tr.script(1, false), Extra: []string{"-C", "preemptible"}})
	waitTrail(t, tr, "start_restart=0_node="+pre.Name, 1, 20*time.Second)

	f.setPreemptible("c1", 0)
	start := time.Now()
	waitTrail(t, tr, "term", 1, 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the SIGTERM came %s after the reclaim", d)
	}
	eventually(t, 30*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved || n.Outcome != domain.OutcomeEarly {
			return fmt.Errorf("node %s %s %s, want removed early", n.Name, n.State, n.Outcome)
		}
		return nil
	})
	if _, ok := nodeOf(t, f.env, pre.Name); ok {
		t.Errorf("node %s is still in slurmctld after its removal", pre.Name)
	}
	eventually(t, 10*time.Second, func() error {
		j := jobByID(t, f.env, id)
		if j.State != "PENDING" || j.Restarts != 1 {
			return fmt.Errorf("job %s %s, %d restarts; want PENDING after one requeue", id, j.State, j.Restarts)
		}
		if hold := time.Until(time.Unix(j.Eligible, 0)); hold > 5*time.Second {
			return fmt.Errorf("job %s is held %s after its requeue", id, hold.Round(time.Second))
		}
		return nil
	})
	// slurmctld tried the job since, and found no node for it: the next
	// pass comes when something starts one.
	eventually(t, 20*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.Reason != "BadConstraints" {
			return fmt.Errorf("job %s pending for %q, want BadConstraints (no preemptible node)", id, j.Reason)
		}
		return nil
	})

	f.setPreemptible("c1", 8)
	waitTrail(t, tr, "start_restart=1_node=", 1, 60*time.Second)
	if n := tr.count("term"); n != 1 {
		t.Errorf("%d SIGTERMs, want 1: %v", n, tr.lines())
	}
	if j := jobByID(t, f.env, id); j.Restarts != 1 || j.State != "RUNNING" {
		t.Errorf("job %s %s, %d restarts; want RUNNING, requeued once", id, j.State, j.Restarts)
	}
	var requeued []string
	for _, e := range f.events("c1") {
		if e.Reason == domain.ReasonJobRequeued {
			requeued = append(requeued, e.NodeName+": "+e.Message)
		}
	}
	if len(requeued) != 1 || !strings.Contains(requeued[0], pre.Name+": job "+id+" (root/train) was requeued: it ended after its notice (COMPLETED)") {
		t.Errorf("JobRequeued events %q", requeued)
	}
	if !strings.Contains(jobByID(t, f.env, id).AdminComment, "requeued") {
		t.Errorf("the job's mark does not say it was requeued: %q", jobByID(t, f.env, id).AdminComment)
	}
}

// terms are the times a job that ignores SIGTERM got one.
func (tr trail) terms() []time.Time {
	var out []time.Time
	for _, l := range tr.lines() {
		if at, ok := strings.CutPrefix(l, "term@"); ok {
			var sec float64
			fmt.Sscanf(at, "%f", &sec)
			out = append(out, time.Unix(0, int64(sec*1e9)))
		}
	}
	return out
}

// TestRequeuedJobRerunsOnANodeThatRanIt: a job of two nodes, one of them
// reclaimed, checkpoints for 3 s, time for the refilled node to join, so
// when it is requeued it reruns at once on the node it kept and the new
// one. slurmd refuses to launch a job whose credential is no newer, to the
// second, than the job's last kill (it revokes it then): a rerun released
// in that second ended at launch, exit 1, and was never requeued again,
// the job lost. Released after that second, it reruns.
func TestRequeuedJobRerunsOnANodeThatRanIt(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 4, window: time.Minute})
	f.createCluster("c1", 8, 16)
	f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 2, 30*time.Second)
	tr := newTrail(t)
	id := submit(t, f.env, job{Name: "pair", Script: tr.script(3, false), Extra: []string{"-C", "preemptible", "--nodes=2"}})
	waitTrail(t, tr, "start_restart=0_node=", 1, 20*time.Second)

	f.setPreemptible("c1", 8) // one of the job's two nodes goes
	waitTrail(t, tr, "term", 1, 10*time.Second)
	f.setPreemptible("c1", 16)
	waitTrail(t, tr, "start_restart=1_node=", 1, 30*time.Second)
	if j := jobByID(t, f.env, id); j.State != "RUNNING" || j.Restarts != 1 {
		t.Errorf("job %s: %s with %d restarts, want RUNNING after one requeue", id, j.State, j.Restarts)
	}
}
