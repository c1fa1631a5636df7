package simjob

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/runwrap"
)

// freePort is a TCP port nothing listens on now.
func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// gangRef runs the two ranks of ddp_train.py to their end outside
// sparecap: the run never interrupted.
func gangRef(t testing.TB, py string, args []string) string {
	ref, ckpt := filepath.Join(t.TempDir(), "ref.bin"), t.TempDir()
	port := freePort(t)
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := append(append([]string{}, args...), "--rank", strconv.Itoa(r), "--master-port", port, "--out", ref)
			outs[r], errs[r] = direct(t, py, ckpt, a...).CombinedOutput()
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("the uninterrupted gang, rank %d: %v\n%s", r, errs[r], outs[r])
		}
	}
	return ref
}

// TestDataParallelGangResumesTogether runs ddp_train.py's two ranks
// (torch.distributed over gloo), each under `sparecap run` on its own
// preemptible node of one cluster, and reclaims rank 1's node: rank 0
// learns of it through the flag the ranks share after every step, not by
// a collective timing out; the gang stops at one step, checkpoints once
// and both ranks exit; both restart (rank 1 on the refilled node), resume
// from that checkpoint and end with the weights of a run never
// interrupted, each step done once by each rank.
func TestDataParallelGangResumesTogether(t *testing.T) {
	py := torchPython(t)
	const steps = 2000
	args := []string{example("ddp_train.py"), "--steps", strconv.Itoa(steps), "--width", "32", "--world-size", "2"}
	ref := gangRef(t, py, args)

	w := newWorldOf(t, 60, 16)
	// Both nodes first: a rank placed while the other node still joins
	// would share its node (the spread is a preference).
	waitPreemptible(t, w, 2)
	dir := t.TempDir()
	port := freePort(t)
	got := filepath.Join(dir, "got.bin")
	recs := []*recorder{{}, {}}
	outs := []*bytes.Buffer{{}, {}}
	jobs := make([]*Job, 2)
	for r := range 2 {
		name := "rank" + strconv.Itoa(r)
		job := append([]string{py}, append(args, "--rank", strconv.Itoa(r), "--master-port", port, "--out", got,
			"--step-log", filepath.Join(dir, name+".log"))...)
		// The ranks share the checkpoint volume (dir); each prefers a node
		// the other is not on.
		jobs[r] = w.pythonJob(t, jobSpec{name: name, dir: dir, job: job, avoid: podNames("rank" + strconv.Itoa(1-r))}, recs[r], outs[r])
	}
	first := running(t, jobs[1], recs[1])
	if other := running(t, jobs[0], recs[0]); other.Node == first.Node {
		t.Fatalf("both ranks run on %s; want a node each", first.Node)
	}
	waitLines(t, filepath.Join(dir, "rank0.log"), 300)
	w.reclaim(t, first.Node)
	r0 := completed(t, jobs[0], outs[0], 2*time.Minute)
	r1 := completed(t, jobs[1], outs[1], 2*time.Minute)
	logs := outs[0].String() + outs[1].String()
	if len(r0) != 2 || len(r1) != 2 {
		t.Fatalf("attempts: rank 0 %+v, rank 1 %+v; want 2 each\n%s", r0, r1, logs)
	}
	if a := r1[0]; a.Code != runwrap.ExitCheckpointed || a.Noticed.IsZero() || a.Killed {
		t.Errorf("rank 1's reclaimed attempt: %+v; want the gang's checkpoint after its notice\n%s", a, logs)
	}
	// Rank 0 was not reclaimed: it stopped because the gang did, at once.
	if a := r0[0]; a.Code != 75 || !a.Noticed.IsZero() || a.Killed || a.Ended.Sub(r1[0].Noticed) > 5*time.Second {
		t.Errorf("rank 0's first attempt: %+v; want it to stop with the gang (exit 75) within seconds of rank 1's notice at %s\n%s", a, r1[0].Noticed, logs)
	}
	stopped := gangCheckpoints(t, dir, steps)
	for r, as := range [][]Attempt{r0, r1} {
		if b := as[1]; b.Code != 0 || b.ResumedAt != stopped {
			t.Errorf("rank %d resumed %+v; want from step %d to the end", r, b, stopped)
		}
		stepsOnce(t, filepath.Join(dir, "rank"+strconv.Itoa(r)+".log"), steps)
	}
	if r1[1].Node == r1[0].Node {
		t.Errorf("rank 1 resumed on its reclaimed node %s", r1[0].Node)
	}
	sameBytes(t, got, ref)
	t.Logf("the gang stopped at step %d, checkpointed once, resumed and ended with the uninterrupted run's weights", stopped)
}

// gangCheckpoints checks the gang saved exactly twice, at its stop and at
// its end, and returns the stop's step.
func gangCheckpoints(t testing.TB, dir string, steps int) int64 {
	names, err := filepath.Glob(filepath.Join(dir, "checkpoints", "ckpt-*"))
	if err != nil {
		t.Fatal(err)
	}
	var saved []int64
	for _, n := range names {
		s, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(n), "ckpt-"), 10, 64)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", n, err)
		}
		saved = append(saved, s)
	}
	slices.Sort(saved)
	if len(saved) != 2 || saved[1] != int64(steps) || saved[0] <= 0 {
		t.Fatalf("checkpoints of steps %v; want the gang's one at its stop and the last (%d)", saved, steps)
	}
	return saved[0]
}

// waitPreemptible waits until the world's cluster has n preemptible nodes
// a pod may go on.
func waitPreemptible(t testing.TB, w *world, n int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ready := 0
		for _, v := range w.srv.Sim.Nodes(w.cluster) {
			if v.Class == domain.Preemptible && !v.Unschedulable {
				ready++
			}
		}
		if ready >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the cluster never had %d preemptible nodes", n)
}

// waitLines waits until a step log has n lines.
func waitLines(t testing.TB, path string, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.Count(string(b), "\n") >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never reached %d steps", path, n)
}
