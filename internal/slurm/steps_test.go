package slurm

import "testing"

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
