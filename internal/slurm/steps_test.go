package slurm

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestHasSrunStep: a job is signalled by its steps only when squeue lists
// a numbered step, one srun launched; the batch and extern steps are not.
func TestHasSrunStep(t *testing.T) {
	for _, c := range []struct {
		steps string
		want  bool
	}{
		{"", false},
		{"5.batch\n5.extern\n", false},
		{"5.batch\n5.0\n", true},
		{"  12.3  ", true},
		{"5.interactive\n", false},
		{"garbage\n5.\n", false},
	} {
		if got := hasSrunStep(c.steps); got != c.want {
			t.Errorf("hasSrunStep(%q) = %v, want %v", c.steps, got, c.want)
		}
	}
}

// TestNoticeArgsFallBack: the notice signals the steps only when squeue
// listed an srun step; when the listing fails, or slurmctld is slower than
// stepsWait to answer it, the notice goes out at once with --full (as
// before steps were listed) rather than wait on the listing.
func TestNoticeArgsFallBack(t *testing.T) {
	for _, c := range []struct {
		name, squeue string
		want         []string
	}{
		{"an srun step", "echo 7.batch; echo 7.0", []string{"--signal=TERM", "7"}},
		{"the batch shell only", "echo 7.batch", []string{"--signal=TERM", "--full", "7"}},
		{"the listing fails", "echo 'slurm_load_jobs error: Unexpected message received' >&2; exit 1", []string{"--signal=TERM", "--full", "7"}},
		{"slurmctld too slow to list", "exec sleep 60", []string{"--signal=TERM", "--full", "7"}},
		// A site's wrapper around squeue whose child outlives it holds
		// the output pipe open after the wrapper is killed.
		{"a wrapper too slow to list", "sleep 60; echo 7.0", []string{"--signal=TERM", "--full", "7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := &Cluster{run: standInRunner(t, "squeue", c.squeue)}
			start := time.Now()
			got := cl.noticeArgs(context.Background(), 7)
			// A listing held past stepsWait would take the stand-in's 60 s.
			if took := time.Since(start); took > stepsWait+10*time.Second {
				t.Errorf("the notice waited %s on the listing; stepsWait is %s", took, stepsWait)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("scancel %q, want %q", got, c.want)
			}
		})
	}
}
