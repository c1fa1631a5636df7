package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// sameWorld fails unless a and b show the same nodes, events and machines.
func sameWorld(t *testing.T, a, b *Fleet) {
	t.Helper()
	if x, y := a.Nodes(""), b.Nodes(""); !reflect.DeepEqual(x, y) {
		t.Fatalf("nodes differ:\n%+v\n%+v", x, y)
	}
	if x, y := a.Events(), b.Events(); !reflect.DeepEqual(x, y) {
		t.Fatalf("events differ:\n%+v\n%+v", x, y)
	}
	if x, y := a.Machines(), b.Machines(); !reflect.DeepEqual(x, y) {
		t.Fatalf("machines differ:\n%+v\n%+v", x, y)
	}
}

func reopen(t *testing.T, fc *clock.Fake, path string) *Fleet {
	t.Helper()
	g, err := New(Config{Clock: fc, StatePath: path})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// churn makes every kind of change, rounds times over a handful of nodes:
// adds, pods, cordons, taints, annotations, node and pod events (new and
// aggregated), readiness, deletions of pods and nodes, prepares and wipes.
func churn(t *testing.T, f *Fleet, fc *clock.Fake, rounds int) {
	t.Helper()
	for r := range rounds {
		name := fmt.Sprintf("n%d", r%7)
		m := domain.Machine{ID: "m-" + name}
		extra := "extra-" + strconv.FormatInt(fc.Now().Unix(), 10) // the clock steps every round
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
		must(f.AddNode(ctx, spec(name)))
		must(f.Cordon(ctx, cluster, name))
		must(f.Taint(ctx, cluster, name, Taint{Key: domain.TaintPreempted, Value: strconv.Itoa(r % 3), Effect: "NoSchedule"}))
		must(f.Annotate(ctx, cluster, name, "round", strconv.Itoa(r)))
		must(f.PostEvent(ctx, cluster, name, driver.Notice{Reason: "Round", Message: strconv.Itoa(r % 4)}))
		must(f.PostNotice(ctx, cluster, name, &driver.Work{Namespace: "ml", Name: "trainer"}, driver.Notice{Warning: true, Reason: "Evicting", Message: "x"}))
		must(f.SetReady(cluster, name, r%2 == 0))
		must(f.AddPod(cluster, name, PodTemplate{Name: extra, TerminationGracePeriod: time.Minute, ExitAfter: time.Second}))
		_, err := f.Prepare(ctx, m, spec(name))
		must(err)
		fc.Step(time.Second)
		must(f.DeletePod(ctx, cluster, name, driver.Work{Namespace: "default", Name: extra}, 30*time.Second))
		switch r % 5 {
		case 3:
			must(f.Uncordon(cluster, name))
		case 4:
			must(f.Release(ctx, cluster, name))
			_, err := f.Wipe(ctx, m, cluster, name)
			must(err)
		}
	}
}

func TestReopenAfterManyChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	churn(t, f, fc, 60)
	if _, err := os.Stat(logPath(path)); err != nil {
		t.Fatalf("the changes went to no log: %v", err)
	}
	if len(f.Nodes("")) == 0 || len(f.Events()) == 0 || len(f.Machines()) == 0 {
		t.Fatal("churn left an empty world")
	}
	g := reopen(t, fc, path)
	sameWorld(t, f, g)
	// The reopened fleet compacted: its log is gone, and its own changes
	// survive the next reopen.
	if _, err := os.Stat(logPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("log after reopen: %v; want none", err)
	}
	churn(t, g, fc, 9)
	sameWorld(t, g, reopen(t, fc, path))
}

// TestEventLogWindowReplays: the fleet-wide event log keeps its window of
// maxLogEvents through a replay.
func TestEventLogWindowReplays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path, Pods: []PodTemplate{}})
	f.store.minCompact = 1 << 40 // all of it through the log
	// Spread over nodes: each change logs its node with all its events.
	node := func(i int) string { return "n" + strconv.Itoa(i%50) }
	for i := range 50 {
		mustAdd(t, f, node(i))
	}
	for i := range maxLogEvents + 50 {
		if err := f.PostEvent(ctx, cluster, node(i), driver.Notice{Reason: "R", Message: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Bump an event inside the window and one that fell out of it.
	for _, i := range []int{1040, 3} {
		if err := f.PostEvent(ctx, cluster, node(i), driver.Notice{Reason: "R", Message: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(f.Events()); got != maxLogEvents {
		t.Fatalf("%d events in the log; want %d", got, maxLogEvents)
	}
	sameWorld(t, f, reopen(t, fc, path))
}

// lastChange makes a change after which the node has annotation k.
func lastChange(t *testing.T, f *Fleet) {
	t.Helper()
	if err := f.Annotate(ctx, cluster, "n1", "k", "last"); err != nil {
		t.Fatal(err)
	}
}

func TestTornLastLogRecordIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(last []byte) []byte // what is left of the last line
	}{
		{"cut short", func(last []byte) []byte { return last[:len(last)/2] }},
		{"no newline", func(last []byte) []byte { return last[:len(last)-1] }},
		{"zero filled", func(last []byte) []byte { return make([]byte, len(last)) }},
		{"garbage line", func(last []byte) []byte { return []byte("{\"seq\":9x\n\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sim-state.json")
			f, fc := newFleet(t, Config{StatePath: path})
			churn(t, f, fc, 6)
			mustAdd(t, f, "n1")
			before := reopen(t, fc, path) // compacts; f's log is gone
			f, _ = newFleet(t, Config{Clock: fc, StatePath: path})
			lastChange(t, f)

			data, err := os.ReadFile(logPath(path))
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
			torn := append(data[:i:i], tc.tear(data[i:])...)
			if err := os.WriteFile(logPath(path), torn, 0o600); err != nil {
				t.Fatal(err)
			}
			g := reopen(t, fc, path)
			sameWorld(t, before, g)
			if v, _ := g.Node(cluster, "n1"); v.Annotations["k"] != "" {
				t.Fatal("the torn change was applied")
			}
			// The torn tail is cut off: later changes are kept.
			lastChange(t, g)
			h := reopen(t, fc, path)
			sameWorld(t, g, h)
			if v, _ := h.Node(cluster, "n1"); v.Annotations["k"] != "last" {
				t.Fatal("the change after the torn record was lost")
			}
		})
	}
}

func TestCorruptLogRecordBeforeTheLastFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	churn(t, f, fc, 3)
	data, err := os.ReadFile(logPath(path))
	if err != nil {
		t.Fatal(err)
	}
	// A colon of the first record's JSON: corrupt whatever the record
	// holds (a byte inside a string would still parse).
	mid := bytes.IndexByte(data, '\n') / 2
	data[mid+bytes.IndexByte(data[mid:], ':')] = '#'
	if err := os.WriteFile(logPath(path), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Clock: fc, StatePath: path}); err == nil {
		t.Fatal("New with a corrupt record followed by good ones: want error")
	}
}

func TestCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	f.store.minCompact = 8 << 10
	compactions, logSize := 0, int64(0)
	for range 40 {
		churn(t, f, fc, 1)
		if f.store.logSize < logSize {
			compactions++ // the log restarted during the round
		}
		logSize = f.store.logSize
		snap, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if limit := max(compactRatio*snap.Size(), f.store.minCompact) + 64<<10; f.store.logSize > limit {
			t.Fatalf("log of %d bytes, snapshot of %d: not compacted", f.store.logSize, snap.Size())
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction")
	}
	g := reopen(t, fc, path)
	sameWorld(t, f, g)
}

// TestCrashBetweenSnapshotAndLogRemoval: if the old log outlives a
// compaction (a crash, or a failed removal), its records are in the
// snapshot already and are skipped, also with newer records appended.
func TestCrashBetweenSnapshotAndLogRemoval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	churn(t, f, fc, 10)
	old, err := os.ReadFile(logPath(path))
	if err != nil {
		t.Fatal(err)
	}
	g := reopen(t, fc, path) // compacts and removes the log
	if err := os.WriteFile(logPath(path), old, 0o600); err != nil {
		t.Fatal(err)
	}
	sameWorld(t, g, reopen(t, fc, path))
	g = reopen(t, fc, path)
	if err := os.WriteFile(logPath(path), old, 0o600); err != nil {
		t.Fatal(err)
	}
	churn(t, g, fc, 4) // appended after the old records
	sameWorld(t, g, reopen(t, fc, path))
}

func TestCopyingReaderSeesAConsistentState(t *testing.T) {
	// A copy taken log first, snapshot second, across a compaction.
	dir := t.TempDir()
	path := filepath.Join(dir, "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	churn(t, f, fc, 10)
	oldLog, err := os.ReadFile(logPath(path))
	if err != nil {
		t.Fatal(err)
	}
	g := reopen(t, fc, path) // compacts between the two reads
	snap, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.json")
	if err := os.WriteFile(logPath(cp), oldLog, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, snap, 0o600); err != nil {
		t.Fatal(err)
	}
	sameWorld(t, g, reopen(t, fc, cp))
}

// oldStateFile is a state file as the previous version wrote it: the whole
// world, indented, version 1, no log.
const oldStateFile = `{
 "version": 1,
 "eventSeq": 2,
 "nodes": [
  {
   "clusterID": "c-1",
   "name": "n1",
   "machineID": "m-n1",
   "class": "preemptible",
   "gpus": 8,
   "profile": "custom",
   "labels": {
    "sparecap.dev/compute-class": "preemptible"
   },
   "taints": [
    {
     "Key": "sparecap.dev/preempted",
     "Value": "true",
     "Effect": "NoSchedule"
    }
   ],
   "annotations": {
    "sparecap.dev/preempt-deadline": "2025-03-01T12:05:00Z"
   },
   "unschedulable": true,
   "addedAt": "2025-03-01T12:00:00Z",
   "events": [
    {
     "seq": 2,
     "clusterID": "c-1",
     "nodeName": "n1",
     "type": "Warning",
     "reason": "PreemptionNotified",
     "message": "bye",
     "firstAt": "2025-03-01T12:00:00Z",
     "lastAt": "2025-03-01T12:00:00Z",
     "count": 1
    }
   ],
   "pods": [
    {
     "namespace": "ml",
     "name": "trainer",
     "terminationGracePeriod": 600000000000,
     "exitAfter": -1,
     "sigtermAt": "2025-03-01T12:00:00Z",
     "grace": 300000000000,
     "goneAt": "2025-03-01T12:05:00Z",
     "end": "Killed"
    }
   ]
  }
 ],
 "machines": [
  {
   "id": "m-n1",
   "job": "prepare",
   "clusterID": "c-1",
   "nodeName": "n1",
   "startedAt": "2025-03-01T11:59:40Z"
  }
 ],
 "events": [
  {
   "seq": 1,
   "clusterID": "c-1",
   "nodeName": "n0",
   "type": "Normal",
   "reason": "Gone",
   "message": "deleted since",
   "firstAt": "2025-03-01T11:50:00Z",
   "lastAt": "2025-03-01T11:50:00Z",
   "count": 1
  },
  {
   "seq": 2,
   "clusterID": "c-1",
   "nodeName": "n1",
   "type": "Warning",
   "reason": "PreemptionNotified",
   "message": "bye",
   "firstAt": "2025-03-01T12:00:00Z",
   "lastAt": "2025-03-01T12:00:00Z",
   "count": 1
  }
 ]
}
`

func TestOldWholeStateFileLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	if err := os.WriteFile(path, []byte(oldStateFile), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(t0)
	f := reopen(t, fc, path)
	v, ok := f.Node(cluster, "n1")
	if !ok || !v.Unschedulable || len(v.Taints) != 1 || v.Annotations[domain.AnnotationDeadline] != "2025-03-01T12:05:00Z" ||
		len(v.Events) != 1 || v.TerminatingPods() != 1 || !v.Pods[0].GoneAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("node n1 from the old file: %+v, %v", v, ok)
	}
	if ev := f.Events(); len(ev) != 2 || ev[0].NodeName != "n0" || ev[1].Seq != 2 {
		t.Fatalf("events from the old file: %+v", ev)
	}
	if m, ok := f.Machine("m-n1"); !ok || m.Phase != MachinePrepared || !m.StartedAt.Equal(t0.Add(-20*time.Second)) {
		t.Fatalf("machine from the old file: %+v, %v", m, ok)
	}
	// It is the first snapshot: changes go to the log on top of it.
	if err := f.PostEvent(ctx, cluster, "n1", driver.Notice{Reason: "Next", Message: "after"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logPath(path)); err != nil {
		t.Fatalf("no log after a change: %v", err)
	}
	g := reopen(t, fc, path)
	sameWorld(t, f, g)
	if ev := g.Events(); len(ev) != 3 || ev[2].Seq != 3 {
		t.Fatalf("events after the change: %+v", ev)
	}
}

// TestConcurrentChangesAreDurable: changes made by many callers at once,
// whose lines share fsyncs, are all there after a reopen, and compactions
// in between (a tiny threshold) lose none of them.
func TestConcurrentChangesAreDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	f.store.minCompact = 4 << 10
	const callers, each = 16, 25
	for i := range callers {
		if err := f.AddNode(ctx, spec(fmt.Sprintf("n-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range each {
				if err := f.Annotate(ctx, cluster, fmt.Sprintf("n-%d", i), fmt.Sprintf("k%d", j), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	g := reopen(t, fc, path)
	sameWorld(t, f, g)
	for i := range callers {
		n, ok := g.Node(cluster, fmt.Sprintf("n-%d", i))
		if !ok || len(n.Annotations) < each {
			t.Fatalf("node n-%d after reopen: %d annotations, want %d", i, len(n.Annotations), each)
		}
	}
}

// TestStalledDiskDoesNotHoldACallPastItsContext: while the disk does not
// finish an fsync, a change waiting for it returns its context's error at
// the context's end (a drain step's calls end at the deadline), other
// calls are not blocked behind the fleet's lock, and once the disk answers
// the change is there.
func TestStalledDiskDoesNotHoldACallPastItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	f, fc := newFleet(t, Config{StatePath: path})
	if err := f.AddNode(ctx, spec("n-1")); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	f.store.syncFile = func(file *os.File) error { <-stall; return file.Sync() }
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := f.Annotate(short, cluster, "n-1", "k", "v")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a change on a stalled disk: %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("returned %s after a 100ms context", waited)
	}
	// The fleet's lock is free: a read gets it, then waits for the stalled
	// line (it may have seen that change) and gives up with its context.
	short2, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if _, err := f.ListWork(short2, cluster, "n-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read behind the stalled line: %v", err)
	}
	close(stall)
	if err := f.Annotate(ctx, cluster, "n-1", "k2", "v2"); err != nil {
		t.Fatal(err)
	}
	n, _ := reopen(t, fc, path).Node(cluster, "n-1")
	if n.Annotations["k"] != "v" || n.Annotations["k2"] != "v2" {
		t.Fatalf("annotations after the disk came back: %v", n.Annotations)
	}
}
