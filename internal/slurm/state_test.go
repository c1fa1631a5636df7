package slurm

import (
	"strings"
	"testing"
	"time"
)

// TestUnreachableSlurmctldIsNoAnswer: with slurmctld down, sinfo and
// squeue exit 0 with an error and nothing listed (measured on 22.05.8).
// That is an error, never an empty cluster: its nodes would look gone
// (lost, their machines taken back) and their work ended.
func TestUnreachableSlurmctldIsNoAnswer(t *testing.T) {
	const nodes = `{"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}`
	const jobs = `{"meta": {}, "errors": [{"description": "Failed while looking for jobs", "error_number": -1, "error": "Unspecified error"}], "jobs": []}`
	const okNodes, okJobs = `{"errors": [], "nodes": [{"name": "n1"}]}`, `{"errors": [], "jobs": []}`
	if _, err := parseSnapshot(time.Now(), []byte(nodes), []byte(okJobs)); err == nil || !strings.Contains(err.Error(), "sinfo --json: Unspecified error (errno -1)") {
		t.Errorf("sinfo's error: %v", err)
	}
	if _, err := parseSnapshot(time.Now(), []byte(okNodes), []byte(jobs)); err == nil || !strings.Contains(err.Error(), "Failed while looking for jobs") {
		t.Errorf("squeue's error: %v", err)
	}
	s, err := parseSnapshot(time.Now(), []byte(okNodes), []byte(okJobs))
	if err != nil || s.nodes["n1"] == nil {
		t.Errorf("an answer: %v, %+v", err, s)
	}
}
