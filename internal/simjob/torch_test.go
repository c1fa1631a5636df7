package simjob

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/runwrap"
)

// torchPython is the Python that has Debian's PyTorch (python3-torch,
// which scripts/ensure-torch.sh installs for make test): Debian's own
// /usr/bin/python3, as a python3 earlier on PATH may not see it.
func torchPython(t testing.TB) string {
	py := cmp.Or(os.Getenv("SPARECAP_TORCH_PYTHON"), "/usr/bin/python3")
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch (scripts/ensure-torch.sh installs Debian's python3-torch): %v\n%s", py, err, out)
	}
	return py
}

// example is the path of an example of the Python SDK.
func example(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "sdk", "python", "examples", name)
}

// direct runs an example to its end outside sparecap: the run never
// interrupted that a resumed one must equal.
func direct(t testing.TB, py, ckpt string, args ...string) *exec.Cmd {
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "SPARECAP_CHECKPOINT_DIR="+ckpt)
	return cmd
}

// stepsOnce checks a step log holds each step 1..n exactly once.
func stepsOnce(t testing.TB, path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n+1)
	for _, line := range strings.Fields(string(b)) {
		s, err := strconv.Atoi(line)
		if err != nil || s < 1 || s > n {
			t.Fatalf("%s: step %q is not one of 1..%d", path, line, n)
		}
		seen[s]++
	}
	for s := 1; s <= n; s++ {
		if seen[s] != 1 {
			t.Fatalf("%s: step %d done %d times; want each step once", path, s, seen[s])
		}
	}
}

func sameBytes(t testing.TB, got, want string) {
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("the final weights of the reclaimed run (%d bytes) are not those of the run never interrupted (%d bytes)", len(a), len(b))
	}
}

// TestPyTorchExampleResumesBitForBit runs the SDK's PyTorch example under
// `sparecap run` on a preemptible node, reclaims the node mid-run, and
// lets it resume on the refilled one: no step is lost or done twice, and
// the final weights are byte for byte those of the same run never
// interrupted (model, optimizer, schedule and the random states of torch,
// NumPy and Python all came back).
func TestPyTorchExampleResumesBitForBit(t *testing.T) {
	py := torchPython(t)
	const steps = 3000
	args := []string{example("pytorch_train.py"), "--steps", strconv.Itoa(steps), "--width", "64"}
	ref := filepath.Join(t.TempDir(), "ref.bin")
	if out, err := direct(t, py, t.TempDir(), append(args, "--out", ref)...).CombinedOutput(); err != nil {
		t.Fatalf("the uninterrupted run: %v\n%s", err, out)
	}

	w := newWorld(t, 60)
	dir := t.TempDir()
	rec, out := &recorder{}, &bytes.Buffer{}
	got, log := filepath.Join(dir, "got.bin"), filepath.Join(dir, "steps.log")
	j := w.pythonJob(t, jobSpec{name: "torch", dir: dir, job: append([]string{py}, append(args, "--out", got, "--step-log", log)...), progress: true}, rec, out)
	first := running(t, j, rec)
	waitStep(t, dir, 500)
	w.reclaim(t, first.Node)
	as := completed(t, j, out, 2*time.Minute)
	if len(as) != 2 {
		t.Fatalf("attempts %+v; want 2\n%s", as, out)
	}
	a, b := as[0], as[1]
	if a.Code != runwrap.ExitCheckpointed || a.Lost() != 0 || a.Killed || a.Noticed.IsZero() {
		t.Errorf("the reclaimed attempt: %+v (lost %d); want a checkpoint on the notice and nothing lost\n%s", a, a.Lost(), out)
	}
	if b.Node == a.Node || b.ResumedAt != a.Saved || b.Code != 0 || b.Reached != steps {
		t.Errorf("the resumed attempt: %+v; want another node, resumed at %d, completed\n%s", b, a.Saved, out)
	}
	stepsOnce(t, log, steps)
	sameBytes(t, got, ref)
	if !strings.Contains(out.String(), "checkpointed step") || !strings.Contains(out.String(), "checkpoint took") {
		t.Errorf("the example did not say what its checkpoints cost:\n%s", out)
	}
	t.Logf("reclaimed at step %d, resumed there on %s, %d steps each done once, weights equal (%s)", a.Saved, b.Node, steps, first.Node)
}

// jobSpec is a Python job for pythonJob.
type jobSpec struct {
	name, dir string
	job       []string
	avoid     []string
	progress  bool
}

// pythonJob runs spec's command under `sparecap run` on the world's
// preemptible nodes, with no periodic checkpoint (an hour apart): what a
// reclaim keeps is the notice's.
func (w *world) pythonJob(t testing.TB, spec jobSpec, rec *recorder, out *bytes.Buffer) *Job {
	return w.start(t, Config{Sim: w.srv.Sim, Clock: w.srv.Clock, Speed: w.srv.Speed, ClusterID: w.cluster,
		Class: domain.Preemptible, Name: spec.name, AvoidPods: spec.avoid, Grace: 10 * time.Minute, Binary: binary, Job: spec.job,
		Interval: time.Hour, Margin: 500 * time.Millisecond, Dir: spec.dir, Progress: spec.progress, Output: out, OnEvent: rec.add})
}

// podNames are the first pods of a job called name.
func podNames(name string) []string {
	var out []string
	for i := 1; i <= 20; i++ {
		out = append(out, fmt.Sprintf("%s-%d", name, i))
	}
	return out
}
