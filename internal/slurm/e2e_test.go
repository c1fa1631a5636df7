package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// docScript is the sbatch script of docs/slurm.md, as a tenant copies it.
func docScript(t *testing.T) string {
	t.Helper()
	return markedScript(t, "slurm.md", "the sbatch script internal/slurm/e2e_test.go runs")
}

// markedScript is the bash block a page of docs marks with
// <!-- test: mark -->.
func markedScript(t *testing.T, page, mark string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- test: "+mark+" -->\n```bash\n")
	if !ok {
		t.Fatalf("docs/%s has no script marked %q", page, mark)
	}
	script, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("docs/%s: the script marked %q does not end", page, mark)
	}
	return script
}

// buildBinary builds sparecap into dir.
func buildBinary(t *testing.T, dir string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "sparecap"), "./cmd/sparecap")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sparecap: %v\n%s", err, out)
	}
}

var (
	noticeRE  = regexp.MustCompile(`trainer: notice \(([^)]*)\), (\S+) left: checkpointing step (\d+)`)
	resumedRE = regexp.MustCompile(`trainer: resumed at step (\d+)`)
)

// TestDocsJobScriptSurvivesAReclaim runs docs/slurm.md's sbatch script,
// unchanged, under a real slurmctld: the job runs `sparecap run` and the
// trainer on a preemptible node; the node is reclaimed; the trainer learns
// the deadline from the node, checkpoints and exits, so the node goes
// early; sparecap requeues the job; it resumes from its checkpoint on the
// refilled node as a rerun; no step is lost.
func TestDocsJobScriptSurvivesAReclaim(t *testing.T) {
	bin := t.TempDir()
	buildBinary(t, bin)
	work, ckpt := t.TempDir(), t.TempDir()
	f := newFixture(t, fixtureConfig{machines: 3, window: time.Minute})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	script := filepath.Join(work, "train.sbatch")
	if err := os.WriteFile(script, []byte(docScript(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := f.env.Run(f.ctx, "sbatch", "--parsable", "-D", work,
		"--export=ALL,PATH="+bin+":"+os.Getenv("PATH")+",CKPT_ROOT="+ckpt, script)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	t.Cleanup(func() { f.env.Run(f.ctx, "scancel", id) })
	log := filepath.Join(work, "train-"+id+".out")
	read := func() string { b, _ := os.ReadFile(log); return string(b) }
	eventually(t, 30*time.Second, func() error {
		if !strings.Contains(read(), "trainer: starting") {
			return fmt.Errorf("the job has not started: %q", read())
		}
		return nil
	})
	time.Sleep(time.Second) // some steps

	f.setPreemptible("c1", 0)
	eventually(t, 30*time.Second, func() error {
		if n := f.node(pre.ID); n.State != domain.NodeRemoved {
			return fmt.Errorf("node %s %s", n.Name, n.State)
		}
		return nil
	})
	n := f.node(pre.ID)
	if n.Outcome != domain.OutcomeEarly {
		t.Errorf("node %s went %s, want early", n.Name, n.Outcome)
	}
	m := noticeRE.FindStringSubmatch(read())
	if m == nil {
		t.Fatalf("no notice in the job's output:\n%s", read())
	}
	left, _ := time.ParseDuration(m[2])
	// The trainer knew the deadline (about 60 s away), not a default grace.
	if left < 40*time.Second || left > 61*time.Second {
		t.Errorf("the trainer thought it had %s (source %s); the deadline was a minute away", left, m[1])
	}
	checkpointed, _ := strconv.Atoi(m[3])

	f.setPreemptible("c1", 8)
	eventually(t, 60*time.Second, func() error {
		if resumedRE.FindStringSubmatch(read()) == nil {
			return fmt.Errorf("the job has not resumed: %s", read())
		}
		return nil
	})
	resumed, _ := strconv.Atoi(resumedRE.FindStringSubmatch(read())[1])
	if lost := checkpointed - resumed; lost != 0 || checkpointed == 0 {
		t.Errorf("checkpointed at step %d, resumed at %d: %d steps lost", checkpointed, resumed, lost)
	}
	if j := jobByID(t, f.env, id); j.Restarts != 1 {
		t.Errorf("job %s: %d restarts, want 1", id, j.Restarts)
	}
	t.Logf("checkpointed at step %d after the notice (%s left, from %s); resumed at step %d; 0 steps lost", checkpointed, left, m[1], resumed)
}
