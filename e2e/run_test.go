package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunCommand: `sparecap run` as a user calls it: the job's exit code
// passes through; a deadline given by flag brings the checkpoint signal,
// then SIGTERM, and exit 76 when no checkpoint came; bad flags are refused
// before anything starts.
func TestRunCommand(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (int, string) {
		cmd := exec.Command(binary, append([]string{"run", "--annotations-file", "-"}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run("--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exit 7 came back as %d: %s", code, out)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "usr1")
	deadline := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	// The job notes SIGUSR1 and ends on SIGTERM; no checkpoint comes.
	script := `trap 'touch ` + marker + `' USR1; trap 'exit 0' TERM; while :; do sleep 0.05; done`
	start := time.Now()
	code, out := run("--deadline", deadline, "--margin", "2s", "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--", "bash", "-c", script)
	if code != 76 || time.Since(start) > 3*time.Second {
		t.Errorf("a job without a checkpoint: exit %d after %s, want 76 before its deadline:\n%s", code, time.Since(start), out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the job did not get the checkpoint signal:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--deadline", "soon", "--", "true"}, `--deadline "soon"`},
		{[]string{"--checkpoint-signal", "BOGUS", "--", "true"}, `--checkpoint-signal "BOGUS"`},
		{[]string{"--grace", "0s", "--", "true"}, "--grace must be positive"},
		{[]string{"--", filepath.Join(dir, "missing")}, "start "},
	} {
		code, out := run(tc.args...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want an error containing %q", tc.args, code, out, tc.want)
		}
	}
}
