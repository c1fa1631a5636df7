package slurm_test

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

var (
	gangStoppedRE = regexp.MustCompile(`rank (\d): the gang stopped at step (\d+)`)
	gangResumedRE = regexp.MustCompile(`rank (\d): resumed at step (\d+)`)
)

// torchBin is a directory whose python3 is the one with Debian's PyTorch
// (scripts/ensure-torch.sh installs it), first on the job's PATH.
func torchBin(t *testing.T, dir string) {
	t.Helper()
	py := cmp.Or(os.Getenv("SPARECAP_TORCH_PYTHON"), "/usr/bin/python3")
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch (scripts/ensure-torch.sh installs Debian's python3-torch): %v\n%s", py, err, out)
	}
	if err := os.Symlink(py, filepath.Join(dir, "python3")); err != nil {
		t.Fatal(err)
	}
}

// stepsOf is each rank's step that re matched in out, by rank.
func stepsOf(re *regexp.Regexp, out string) map[string]string {
	got := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2]
	}
	return got
}

// TestDocsGangScriptSurvivesAReclaim runs docs/workloads.md's sbatch
// script of a data-parallel gang, unchanged, under a real slurmctld: two
// ranks of ddp_train.py, one per preemptible node, started by srun under
// `sparecap run`. One node is reclaimed: both ranks stop at the same step
// (the other learns of it at that step, from the flag the ranks share),
// the gang checkpoints, the job is requeued, reruns on two nodes once the
// target is refilled, and both ranks resume from that step. slurmctld's
// periodic pass is 10 minutes away: the rerun starts on the refilled node
// when it joins, whichever comes first, the node or the requeue.
func TestDocsGangScriptSurvivesAReclaim(t *testing.T) {
	bin := t.TempDir()
	buildBinary(t, bin)
	torchBin(t, bin)
	work, ckpt := t.TempDir(), t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	example := filepath.Join(filepath.Dir(file), "..", "..", "sdk", "python", "examples", "ddp_train.py")
	if err := os.Symlink(example, filepath.Join(work, "ddp_train.py")); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureConfig{machines: 4, window: time.Minute, schedInterval: 10 * time.Minute})
	f.createCluster("c1", 8, 16)
	f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 2, 30*time.Second)
	script := filepath.Join(work, "ddp.sbatch")
	if err := os.WriteFile(script, []byte(markedScript(t, "workloads.md", "the gang's sbatch script internal/slurm/e2e_test.go runs")), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := f.env.Run(f.ctx, "sbatch", "--parsable", "-D", work,
		"--export=ALL,PATH="+bin+":"+os.Getenv("PATH")+",CKPT_ROOT="+ckpt+",GLOO_SOCKET_IFNAME=lo", script)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	t.Cleanup(func() { f.env.Run(f.ctx, "scancel", id) })
	read := func() string { b, _ := os.ReadFile(filepath.Join(work, "ddp-"+id+".out")); return string(b) }
	tl := watchJob(t, f, id)
	eventually(t, 60*time.Second, func() error {
		if strings.Count(read(), "starting from scratch") < 2 {
			return fmt.Errorf("the gang has not started: %q", read())
		}
		return nil
	})
	time.Sleep(2 * time.Second) // some steps

	tl.mark("the gang runs; one of its nodes is reclaimed")
	f.setPreemptible("c1", 8) // one of the two nodes goes
	eventually(t, 60*time.Second, func() error {
		if s := stepsOf(gangStoppedRE, read()); len(s) < 2 {
			return fmt.Errorf("the gang has not stopped: %s", read())
		}
		return nil
	})
	stopped := stepsOf(gangStoppedRE, read())
	if stopped["0"] != stopped["1"] {
		t.Fatalf("the ranks stopped at steps %v, not at one step:\n%s", stopped, read())
	}
	tl.mark("the gang stopped; the target is refilled")
	f.setPreemptible("c1", 16)
	eventually(t, 120*time.Second, func() error {
		if s := stepsOf(gangResumedRE, read()); len(s) < 2 {
			return fmt.Errorf("the gang has not resumed: %s", read())
		}
		return nil
	})
	if resumed := stepsOf(gangResumedRE, read()); resumed["0"] != stopped["0"] || resumed["1"] != stopped["0"] {
		t.Fatalf("stopped at step %s, resumed at %v:\n%s", stopped["0"], resumed, read())
	}
	if j := jobByID(t, f.env, id); j.Restarts != 1 {
		t.Errorf("job %s: %d restarts, want 1", id, j.Restarts)
	}
	t.Logf("the gang stopped at step %s on one node's reclaim, was requeued and resumed there on two nodes", stopped["0"])
}
