package preempt

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The scheduled notice is read from the pod's annotations and from a
// Slurm node's Extra; a deadline alone, or nothing, schedules none.
func TestScheduled(t *testing.T) {
	t.Setenv("SLURMD_NODENAME", "")
	dir := t.TempDir()
	file := filepath.Join(dir, "annotations")
	want := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	if err := os.WriteFile(file, []byte("app=\"trainer\"\nsparecap.dev/preempt-at=\"2026-12-08T09:00:00Z\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := Scheduled(context.Background(), file); !ok || !got.Equal(want) {
		t.Errorf("from the annotations: %s %v", got, ok)
	}
	if err := os.WriteFile(file, []byte("2026-12-08T09:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := Scheduled(context.Background(), file); ok {
		t.Errorf("a file of the deadline alone read as scheduled: %s", got)
	}
	if _, ok := Scheduled(context.Background(), filepath.Join(dir, "none")); ok {
		t.Error("no file: scheduled")
	}
	show := `NodeName=gpu-preemptible-dp-2 Arch=x86_64 Extra={"sparecap.dev/preempt-at":"2026-12-08T09:00:00Z"}`
	if got, ok := SlurmScheduled(show); !ok || !got.Equal(want) {
		t.Errorf("from Slurm's Extra: %s %v", got, ok)
	}
	if _, ok := SlurmScheduled(`NodeName=n Extra={"sparecap.dev/deadline":"2026-12-08T09:00:00Z"}`); ok {
		t.Error("a deadline read as scheduled")
	}
}
