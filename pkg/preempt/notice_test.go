package preempt

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func wait(t *testing.T, ch <-chan Notice) Notice {
	t.Helper()
	select {
	case n, ok := <-ch:
		if !ok {
			t.Fatal("the notice channel closed without a notice")
		}
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5 s")
	}
	return Notice{}
}

func quiet(t *testing.T, ch <-chan Notice) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("a notice before anything happened: %+v", n)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestNoticeSources: the notice comes from each source with its deadline:
// the environment at start, the deadline file, the Downward API file of
// annotations (all of them, or the one), and a signal (the files'
// deadline if known by then, else now plus the grace).
func TestNoticeSources(t *testing.T) {
	deadline := time.Date(2026, 12, 3, 12, 5, 0, 0, time.UTC)
	dir := t.TempDir()
	opts := func() Options {
		return Options{AnnotationsFile: filepath.Join(dir, "annotations"), DeadlineFile: filepath.Join(dir, "deadline"),
			Poll: 10 * time.Millisecond, Signals: []os.Signal{syscall.SIGUSR2}}
	}
	reset := func() {
		os.Remove(filepath.Join(dir, "annotations"))
		os.Remove(filepath.Join(dir, "deadline"))
	}
	ctx := t.Context()

	t.Run("environment", func(t *testing.T) {
		t.Setenv(EnvDeadline, deadline.Format(time.RFC3339))
		if n := wait(t, Watch(ctx, opts())); !n.Deadline.Equal(deadline) || n.Source != "environment" {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("deadline file", func(t *testing.T) {
		reset()
		os.WriteFile(filepath.Join(dir, "deadline"), nil, 0o644) // known later
		ch := Watch(ctx, opts())
		quiet(t, ch)
		os.WriteFile(filepath.Join(dir, "deadline"), []byte(deadline.Format(time.RFC3339)+"\n"), 0o644)
		if n := wait(t, ch); !n.Deadline.Equal(deadline) || n.Source != "deadline-file" {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("annotations file", func(t *testing.T) {
		reset()
		path := filepath.Join(dir, "annotations")
		os.WriteFile(path, []byte("kubectl.kubernetes.io/restartedAt=\"x\"\n"), 0o644)
		ch := Watch(ctx, opts())
		quiet(t, ch)
		// As the kubelet writes it: key="value" lines, values quoted.
		os.WriteFile(path, []byte("kubectl.kubernetes.io/restartedAt=\"x\"\nsparecap.dev/preempt-deadline=\""+deadline.Format(time.RFC3339)+"\"\n"), 0o644)
		if n := wait(t, ch); !n.Deadline.Equal(deadline) || n.Source != "annotation" {
			t.Fatalf("%+v", n)
		}
		// The one annotation alone (metadata.annotations['…']).
		os.WriteFile(path, []byte(deadline.Format(time.RFC3339)), 0o644)
		if got, ok := ReadAnnotation(path); !ok || !got.Equal(deadline) {
			t.Fatalf("one annotation: %v %v", got, ok)
		}
	})
	t.Run("signal without a deadline", func(t *testing.T) {
		reset()
		o := opts()
		now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		o.Now, o.Grace = func() time.Time { return now }, 45*time.Second
		ch := Watch(ctx, o)
		quiet(t, ch)
		syscall.Kill(os.Getpid(), syscall.SIGUSR2)
		if n := wait(t, ch); !n.Deadline.Equal(now.Add(45*time.Second)) || n.Source != "SIGUSR2" {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		reset()
		o := opts()
		o.Signals = nil // the defaults: SIGTERM and the checkpoint signal
		o.Grace = time.Minute
		ch := Watch(ctx, o)
		time.Sleep(50 * time.Millisecond)
		before := time.Now()
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		n := wait(t, ch)
		if n.Source != "SIGTERM" || n.Deadline.Before(before.Add(time.Minute)) || n.Deadline.After(time.Now().Add(time.Minute)) {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		reset()
		cctx, cancel := context.WithCancel(ctx)
		ch := Watch(cctx, opts())
		cancel()
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("a notice after cancel")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the channel did not close")
		}
	})
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "sigterm": syscall.SIGTERM, "10": 10} {
		if got, ok := ParseSignal(in); !ok || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v", in, got, ok)
		}
	}
	if _, ok := ParseSignal("BOGUS"); ok {
		t.Error("BOGUS parsed")
	}
}

func TestSlurmDeadline(t *testing.T) {
	show := `NodeName=gpu-preemptible-dp-2 Arch=x86_64 CoresPerSocket=1 State=MIXED+DRAIN+DYNAMIC_NORM Reason=sparecap: Reclaimed; deadline 2026-12-04T15:00:00Z [root@2026-12-04T14:55:00] Extra={"sparecap.dev/cause":"Reclaimed","sparecap.dev/deadline":"2026-12-04T15:00:00Z"}` + "\n"
	if got, ok := SlurmDeadline(show); !ok || !got.Equal(time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("%v %v", got, ok)
	}
	for _, s := range []string{"NodeName=x State=IDLE", "NodeName=x Extra=not-json", `NodeName=x Extra={"other":"1"}`} {
		if _, ok := SlurmDeadline(s); ok {
			t.Errorf("%q: a deadline", s)
		}
	}
}
