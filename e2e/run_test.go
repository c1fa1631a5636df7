package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
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
	marker, ready, deadlineFile := filepath.Join(dir, "usr1"), filepath.Join(dir, "ready"), filepath.Join(dir, "deadline")
	// The job notes SIGUSR1 and ends on SIGTERM; no checkpoint comes. Its
	// deadline comes once its traps are set (a job's notice comes while
	// it runs): a loaded machine may take a while to start bash. The trap
	// notes USR1 without a fork: SIGTERM goes to the whole process group
	// and would kill a touch that a loaded machine had not run yet.
	script := `trap ': > ` + marker + `' USR1; trap 'exit 0' TERM; touch ` + ready + `; while :; do sleep 0.05; done`
	cmd := exec.Command(binary, "run", "--annotations-file", "-", "--deadline-file", deadlineFile, "--margin", "2s",
		"--checkpoint-dir", filepath.Join(dir, "ckpt"), "--", "bash", "-c", script)
	cmd.Env = cleanEnv()
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(end) {
			cmd.Process.Kill()
			t.Fatalf("the job did not start in 20 s: %s", buf.String())
		}
	}
	start := time.Now()
	const deadline = 5 * time.Second
	writeFile(t, deadlineFile, start.Add(deadline).UTC().Format(time.RFC3339Nano))
	err := cmd.Wait()
	var ee *exec.ExitError
	if code := 0; !errors.As(err, &ee) || ee.ExitCode() != 76 || time.Since(start) > deadline {
		if ee != nil {
			code = ee.ExitCode()
		}
		t.Errorf("a job without a checkpoint: exit %d (%v) after %s, want 76 before its deadline:\n%s", code, err, time.Since(start), buf.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the job did not get the checkpoint signal:\n%s", buf.String())
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

// TestRunAsksForTheInterval: with --region and --gpu-type, sparecap run
// asks the API for the checkpoint interval and hands the job the advised
// one; without an API it says why and keeps --interval.
func TestRunAsksForTheInterval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, twoRegionFleet)
	srv := startServer(t, serverConfig{DataDir: filepath.Join(dir, "data"), FleetFile: fleetFile, Speed: 600, ConfigPath: filepath.Join(dir, "cli.yaml")})
	ctx := context.Background()
	p, err := apiClient(t, srv.URL, adminToken).CreateProject(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	tc := apiClient(t, srv.URL, p.Token)
	cl, err := tc.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "train", Region: "us-central-2", GPUType: "H100_SXM", NumGPUs: 8, NumPreemptibleGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitCluster(t, tc, cl.ClusterID, time.Minute, "the preemptible node ready", func(c *apiv1.Cluster) bool { return c.AllocatedPreemptibleGPUs == 8 })
	time.Sleep(2 * time.Second) // 20 minutes of node time at 600x
	printInterval := []string{"--", "sh", "-c", "echo interval=$SPARECAP_CHECKPOINT_INTERVAL rate=$SPARECAP_PREEMPTION_RATE"}
	run := func(env []string, args ...string) string {
		cmd := exec.Command(binary, append([]string{"run", "--annotations-file", "-", "--interval", "45m"}, args...)...)
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run([]string{"SPARECAP_URL=" + srv.URL, "SPARECAP_TOKEN=" + p.Token},
		append([]string{"--region", "us-central-2", "--gpu-type", "H100_SXM", "--checkpoint-seconds", "90"}, printInterval...)...)
	a, err := tc.CheckpointAdvice(ctx, "us-central-2", "H100_SXM", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`interval=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no interval reached the job:\n%s", out)
	}
	got, err := time.ParseDuration(m[1])
	if err != nil || a.RecommendedIntervalSeconds <= 0 || math.Abs(got.Seconds()-a.RecommendedIntervalSeconds) > 0.2*a.RecommendedIntervalSeconds ||
		!strings.Contains(out, "daly") {
		t.Fatalf("the job got interval %q; the API advises %.0fs (%s):\n%s", m[1], a.RecommendedIntervalSeconds, a.RateBasis, out)
	}
	// The rate is an upper bound that falls as node time passes (600x):
	// the job's and the test's asks are moments apart.
	rateOf := func(out string) float64 {
		r := regexp.MustCompile(`rate=(\S+)`).FindStringSubmatch(out)
		if r == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(r[1], 64)
		return v
	}
	if got := rateOf(out); got <= 0 || math.Abs(got-a.PreemptionRatePercentPerHour) > 0.2*a.PreemptionRatePercentPerHour {
		t.Fatalf("the job got rate %g; the API measured %g %%/h:\n%s", got, a.PreemptionRatePercentPerHour, out)
	}
	// No checkpoint cost yet: the job keeps --interval and gets the rate,
	// to work its interval out from its first save (the SDKs' Schedule).
	out = run([]string{"SPARECAP_URL=" + srv.URL, "SPARECAP_TOKEN=" + p.Token},
		append([]string{"--region", "us-central-2", "--gpu-type", "H100_SXM"}, printInterval...)...)
	if got := rateOf(out); !strings.Contains(out, "interval=45m0s rate=") || got <= 0 || math.Abs(got-a.PreemptionRatePercentPerHour) > 0.2*a.PreemptionRatePercentPerHour ||
		!strings.Contains(out, "first checkpoint") {
		t.Fatalf("without a checkpoint cost: %s", out)
	}
	out = run(nil, append([]string{"--region", "us-central-2", "--gpu-type", "H100_SXM", "--checkpoint-seconds", "90"}, printInterval...)...)
	if !strings.Contains(out, "interval=45m0s rate=\n") || !strings.Contains(out, "SPARECAP_URL") {
		t.Fatalf("without an API: %s", out)
	}
}

// TestRunSIGTERMTakesTheAnnotation: the kubelet's SIGTERM to `sparecap
// run` is the notice, and the deadline is the one the pod's annotations
// file already shows, not the grace from now. Done several times: the
// signal once also cancelled the command's context, and which of the two
// the wrapper saw first was a coin toss.
func TestRunSIGTERMTakesTheAnnotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	annotations := filepath.Join(dir, "annotations")
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for i := range 20 {
		writeFile(t, annotations, `app="x"`+"\n")
		ready := filepath.Join(dir, fmt.Sprint("ready", i))
		cmd := exec.Command(binary, "run", "--annotations-file", annotations, "--grace", "30s", "--", "bash", "-c",
			`trap 'exit 0' USR1; touch `+ready+`; while :; do sleep 0.05; done`)
		cmd.Env = cleanEnv()
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
		}
		// As the kubelet: the annotation, then SIGTERM. The wrapper may
		// see either first; the deadline must be the annotation's.
		writeFile(t, annotations, `app="x"`+"\n"+`sparecap.dev/preempt-deadline="`+deadline.Format(time.RFC3339)+`"`+"\n")
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		want := "): deadline " + deadline.Format(time.RFC3339)
		if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "cancelled") {
			t.Fatalf("run %d: want %q in:\n%s", i, want, out.String())
		}
	}
}
