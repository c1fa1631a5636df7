package trainer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// TestTrainResumeAndNotice: the job checkpoints on its interval, resumes
// from its checkpoint, and on a notice (the deadline file) saves the
// step it reached and returns at once.
func TestTrainResumeAndNotice(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(preempt.EnvDeadline, "")
	t.Setenv(preempt.EnvAnnotationsFile, "-")
	t.Setenv(preempt.EnvDeadlineFile, filepath.Join(dir, "deadline"))
	t.Setenv(preempt.EnvResumeFrom, "")
	cfg := Config{Steps: 30, StepTime: time.Millisecond, StateBytes: 1000, CheckpointDir: filepath.Join(dir, "ck"),
		Interval: 5 * time.Millisecond, Progress: filepath.Join(dir, "progress")}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ResumedAt != 0 || res.Reached != 30 || res.Saved != 30 || res.Noticed {
		t.Fatalf("first run: %+v", res)
	}
	if b, _ := os.ReadFile(cfg.Progress); strings.TrimSpace(string(b)) != "30" {
		t.Errorf("progress file %q", b)
	}
	store, _ := preempt.Open(cfg.CheckpointDir)
	if entries, _ := os.ReadDir(cfg.CheckpointDir); len(entries) != 3 {
		t.Errorf("checkpoints: %v; want the store's three: periodic ones and the last", entries)
	}

	// Longer now; a notice after a while.
	cfg.Steps = 100000
	var log bytes.Buffer
	cfg.Log = &log
	time.AfterFunc(100*time.Millisecond, func() {
		os.WriteFile(filepath.Join(dir, "deadline"), []byte(time.Now().Add(time.Minute).UTC().Format(time.RFC3339)), 0o644)
	})
	start := time.Now()
	res, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ResumedAt != 30 || !res.Noticed || res.Saved != res.Reached || res.Reached <= 30 || time.Since(start) > 5*time.Second {
		t.Fatalf("run with a notice: %+v after %s", res, time.Since(start))
	}
	if !strings.Contains(log.String(), "resumed at step 30") || !strings.Contains(log.String(), "notice (deadline-file)") {
		t.Errorf("log:\n%s", log.String())
	}
	ck, err := store.Latest()
	if err != nil || ck.Step != res.Reached {
		t.Errorf("latest %+v, %v; want step %d", ck, err, res.Reached)
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{{Steps: 0, StateBytes: 8}, {Steps: 1, StateBytes: 4}, {Steps: 1, StateBytes: 8, StepTime: -1}} {
		c.CheckpointDir = t.TempDir()
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
		if entries, _ := os.ReadDir(c.CheckpointDir); len(entries) != 0 {
			t.Errorf("%+v: wrote %v", c, entries)
		}
	}
}
