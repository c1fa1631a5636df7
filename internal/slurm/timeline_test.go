package slurm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// timeline records, once a second, what a long end-to-end test waits on:
// the job as squeue shows it, the nodes as sinfo shows them and sparecap's
// nodes as its store has them, a line whenever one changes. A failed test
// logs it: a wait that timed out on a loaded machine says where the time
// went (a hold, a node that did not come, a job that did not end).
type timeline struct {
	mu    sync.Mutex
	start time.Time
	lines []string
	last  map[string]string
}

// watchJob starts a timeline of job id on f's cluster until the test ends.
func watchJob(t *testing.T, f *fixture, id string) *timeline {
	tl := &timeline{start: time.Now(), last: map[string]string{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			tl.poll(f, id)
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		if t.Failed() {
			t.Logf("what the test saw, by seconds since the job was submitted:\n%s", tl.String())
			t.Logf("slurmctld's log of job %s:\n%s", id, ctldLogOf(f, id))
		}
	})
	return tl
}

// ctldLogOf is the last lines of slurmctld's log that name job id.
func ctldLogOf(f *fixture, id string) string {
	b, err := os.ReadFile(filepath.Join(f.env.Dir, "log", "slurmctld.log"))
	if err != nil {
		return err.Error()
	}
	var of []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "JobId="+id+" ") || strings.HasSuffix(l, "JobId="+id) {
			of = append(of, l)
		}
	}
	return strings.Join(of[max(0, len(of)-60):], "\n")
}

// mark notes a step of the test itself.
func (tl *timeline) mark(what string) { tl.note("test", what) }

func (tl *timeline) poll(f *fixture, id string) {
	job, err := f.env.Run(f.ctx, "squeue", "-h", "-j", id, "-o", "%T reason=%r start=%S nodes=%N")
	if err != nil {
		job = "squeue: " + err.Error()
	}
	tl.note("job", job)
	nodes, err := f.env.Run(f.ctx, "sinfo", "-h", "-N", "-o", "%N:%T")
	if err != nil {
		nodes = "sinfo: " + err.Error()
	}
	tl.note("slurm nodes", strings.Join(slices.Compact(strings.Fields(nodes)), " "))
	ns, err := f.st.ListNodes(f.ctx, store.NodeFilter{})
	var ours []string
	for _, n := range ns {
		ours = append(ours, fmt.Sprintf("%s:%s:%s", n.Name, n.Class, n.State))
	}
	if err != nil {
		ours = []string{"store: " + err.Error()}
	}
	tl.note("sparecap nodes", strings.Join(ours, " "))
}

// note adds a line for what when its value changed.
func (tl *timeline) note(what, value string) {
	value = strings.TrimSpace(value)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if what != "test" && tl.last[what] == value {
		return
	}
	tl.last[what] = value
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs %s: %s", time.Since(tl.start).Seconds(), what, value))
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}
