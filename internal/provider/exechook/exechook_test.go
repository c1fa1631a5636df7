package exechook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// The tests do not use t.Parallel: writing a script while another test
// forks a hook can leak the script's write descriptor into the child and
// make exec fail with "text file busy". Each test closes its provider, so
// no hook is starting when the next test writes its scripts.

// deadline bounds every wait; it is generous so that slow machines (and
// -race) do not fail, and nothing asserts on speed.
const deadline = 10 * time.Second

var (
	testMachine = domain.Machine{ID: "m-1", Region: "us-east", GPUType: "H100", GPUs: 8, ReservationID: "r-9"}
	testSpec    = driver.NodeSpec{
		ClusterID: "c-4", NodeName: "gpu-preemptible-dp-3", MachineID: "m-1",
		Class: domain.Preemptible, GPUs: 8,
		Labels: map[string]string{domain.LabelComputeClass: "preemptible", "team": "ml"},
	}
)

// script writes an executable bash script and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// setup writes the script into a fresh directory, which the script finds in
// $HOOK_DIR, and returns a provider running it that is closed at cleanup.
func setup(t *testing.T, body string, cfg Config) (*Provider, string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.Program = script(t, dir, "hook", body)
	cfg.Env = append(cfg.Env, "HOOK_DIR="+dir)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, cfg.Program, dir
}

// until polls call until it reports done or fails, and returns its error.
// It does not stop the test, so goroutines may use it.
func until(call func() (bool, error)) error {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		done, err := call()
		if err != nil || done {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("not done after %s", deadline)
}

// eventually waits for cond to hold.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not after %s", what, deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func prepare(p *Provider, m domain.Machine, spec driver.NodeSpec) func() (bool, error) {
	return func() (bool, error) { return p.Prepare(context.Background(), m, spec) }
}

func wipe(p *Provider, m domain.Machine, node string) func() (bool, error) {
	return func() (bool, error) { return p.Wipe(context.Background(), m, "c-4", node) }
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lines counts the lines of a file, 0 if it is missing.
func lines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// syncBuffer is a log destination written to by hook goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// recordBody saves what the hook was given: stdin, arguments (one per
// line, in brackets so empty ones show) and environment.
const recordBody = `a=$SPARECAP_ACTION
cat > "$HOOK_DIR/stdin.$a"
printf '[%s]\n' "$@" > "$HOOK_DIR/args.$a"
env > "$HOOK_DIR/env.$a"
printf '\n  {"message": "did %s on %s", "extra": [1]}  \n\n' "$a" "$SPARECAP_MACHINE_ID"
`

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("stdin is not a JSON object: %v: %q", err, s)
	}
	return v
}

func TestProvisionSuccess(t *testing.T) {
	var logs syncBuffer
	p, _, dir := setup(t, recordBody, Config{
		Args: []string{"--site", "a b"},
		Log:  slog.New(slog.NewTextHandler(&logs, nil)),
		// SPARECAP_ACTION here must not override the real one.
		Env: []string{"EXTRA=extra-value", "SPARECAP_ACTION=overridden"},
	})

	done, err := p.Prepare(context.Background(), testMachine, testSpec)
	if done || err != nil {
		t.Fatalf("first call = %v, %v; want false, nil", done, err)
	}
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}

	got := decodeJSON(t, readFile(t, filepath.Join(dir, "stdin.provision")))
	want := map[string]any{
		"action": "provision",
		"machine": map[string]any{
			"id": "m-1", "region": "us-east", "gpu_type": "H100", "gpus": 8.0, "reservation_id": "r-9",
		},
		"cluster_id": "c-4",
		"node": map[string]any{
			"name": "gpu-preemptible-dp-3", "class": "preemptible", "gpus": 8.0,
			"labels": map[string]any{domain.LabelComputeClass: "preemptible", "team": "ml"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stdin:\n got %v\nwant %v", got, want)
	}

	wantArgs := "[--site]\n[a b]\n[provision]\n[m-1]\n[c-4]\n[gpu-preemptible-dp-3]\n"
	if args := readFile(t, filepath.Join(dir, "args.provision")); args != wantArgs {
		t.Errorf("args:\n%s\nwant:\n%s", args, wantArgs)
	}

	env := readEnv(t, filepath.Join(dir, "env.provision"))
	for k, v := range map[string]string{
		"SPARECAP_ACTION":     "provision",
		"SPARECAP_MACHINE_ID": "m-1",
		"SPARECAP_CLUSTER_ID": "c-4",
		"SPARECAP_NODE_NAME":  "gpu-preemptible-dp-3",
		"EXTRA":               "extra-value",
	} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}

	if !strings.Contains(logs.String(), "did provision on m-1") {
		t.Errorf("hook message not logged:\n%s", logs.String())
	}
}

// readEnv parses the output of env(1), as recordBody saves it.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, l := range strings.Split(readFile(t, path), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestHookEnvironment: a hook gets a minimal environment, never the
// server's own variables (its admin token above all), but PATH, HOME, the
// locale and the operator's extras.
func TestHookEnvironment(t *testing.T) {
	const secretValue = "s3cret-value-of-the-server"
	for _, k := range []string{"SPARECAP_ADMIN_TOKEN", "SPARECAP_TOKEN", "SPARECAP_TEST_PARENT", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY"} {
		t.Setenv(k, secretValue)
	}
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	// Unset in the server: not passed at all.
	t.Setenv("LC_ALL", "")
	os.Unsetenv("LC_ALL")

	p, _, dir := setup(t, recordBody, Config{Env: []string{"EXTRA=extra-value", "SITE_TOKEN=operator-chose-this"}})
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}
	raw := readFile(t, filepath.Join(dir, "env.provision"))
	if strings.Contains(raw, secretValue) {
		t.Fatalf("the hook saw a variable of the server's environment:\n%s", raw)
	}
	env := readEnv(t, filepath.Join(dir, "env.provision"))
	want := map[string]string{
		"PATH":                os.Getenv("PATH"),
		"HOME":                os.Getenv("HOME"),
		"LANG":                "C.UTF-8",
		"TZ":                  "UTC",
		"TMPDIR":              os.Getenv("TMPDIR"),
		"EXTRA":               "extra-value",
		"SITE_TOKEN":          "operator-chose-this",
		"HOOK_DIR":            dir,
		"SPARECAP_ACTION":     "provision",
		"SPARECAP_MACHINE_ID": "m-1",
		"SPARECAP_CLUSTER_ID": "c-4",
		"SPARECAP_NODE_NAME":  "gpu-preemptible-dp-3",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	// Anything else was added by bash itself (PWD, SHLVL, _), never taken
	// from the server.
	for k := range env {
		if _, ok := want[k]; !ok && k != "PWD" && k != "SHLVL" && k != "_" && k != "OLDPWD" {
			t.Errorf("the hook got %s=%q, which is not in its minimal environment", k, env[k])
		}
	}

	// A server without PATH still gives its hook a standard one.
	t.Setenv("PATH", "")
	os.Unsetenv("PATH")
	if got := baseEnv(); got[0] != "PATH="+defaultPath {
		t.Errorf("without PATH: %v", got)
	}
}

func TestDeprovisionInput(t *testing.T) {
	p, _, dir := setup(t, recordBody, Config{})
	stdin := func() map[string]any { return decodeJSON(t, readFile(t, filepath.Join(dir, "stdin.deprovision"))) }
	args := func() string { return readFile(t, filepath.Join(dir, "args.deprovision")) }

	// After a provision the deprovision is told the cluster, and only the
	// node's name.
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}
	if err := until(wipe(p, testMachine, testSpec.NodeName)); err != nil {
		t.Fatal(err)
	}
	got := stdin()
	if got["action"] != "deprovision" || got["cluster_id"] != "c-4" {
		t.Errorf("stdin = %v; want action deprovision, cluster_id c-4", got)
	}
	if node := got["node"]; !reflect.DeepEqual(node, map[string]any{"name": testSpec.NodeName}) {
		t.Errorf("node = %v; want only its name", node)
	}
	if machine, _ := got["machine"].(map[string]any); machine["id"] != "m-1" || machine["gpu_type"] != "H100" {
		t.Errorf("machine = %v", got["machine"])
	}
	if a, want := args(), "[deprovision]\n[m-1]\n[c-4]\n["+testSpec.NodeName+"]\n"; a != want {
		t.Errorf("args:\n%s\nwant:\n%s", a, want)
	}

	// The cluster comes from the caller, not from memory: a machine never
	// provisioned by this process (after a restart, say) is told it too.
	if err := until(func() (bool, error) {
		return p.Wipe(context.Background(), domain.Machine{ID: "m-2"}, "c-9", "gpu-dp-7")
	}); err != nil {
		t.Fatal(err)
	}
	if c := stdin()["cluster_id"]; c != "c-9" {
		t.Errorf("cluster_id = %v; want c-9", c)
	}
	if a, want := args(), "[deprovision]\n[m-2]\n[c-9]\n[gpu-dp-7]\n"; a != want {
		t.Errorf("args:\n%s\nwant:\n%s", a, want)
	}
}

func TestExitFailure(t *testing.T) {
	long := strings.Repeat("é", 400)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"last stderr line", `echo '{}'
echo "starting" >&2
echo "  disk /dev/sda not found  " >&2
printf '\n   \n' >&2
exit 3`, "exited with status 3: disk /dev/sda not found"},
		{"no stderr", "exit 1", "exited with status 1"},
		// The line is cut at 300 characters, and stderr is kept by its
		// tail, so a long stream still yields its last line.
		{"long stderr", `head -c 200000 /dev/zero | tr '\0' 'x' >&2
echo >&2
echo "` + long + `" >&2
exit 2`, "exited with status 2: " + long[:600]},
		{"signal", "kill -TERM $$", "was killed by signal terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, path, _ := setup(t, tc.body, Config{})
			err := until(prepare(p, testMachine, testSpec))
			if want := "provision hook " + path + " " + tc.want; err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant %s", err, want)
			}
		})
	}
}

func TestMalformedOutput(t *testing.T) {
	big := `{"message": "` + strings.Repeat("a", 100<<10) + `"}`
	for _, tc := range []struct {
		name, out, shown string
	}{
		{"text", "all done\n", "all done"},
		{"array", "[1, 2]", "[1, 2]"},
		{"empty", "", ""},
		{"null", "null", "null"},
		{"two objects", "{} {}", "{} {}"},
		{"message not a string", `{"message": 5}`, `{"message": 5}`},
		{"long", strings.Repeat("b", 1000), strings.Repeat("b", 200)},
		// Stdout is cut at 64 KiB, which leaves no valid object.
		{"over the cap", big, big[:200]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "out"), []byte(tc.out), 0o644); err != nil {
				t.Fatal(err)
			}
			p, path, _ := setup(t, `cat "`+dir+`/out"`, Config{})
			err := until(wipe(p, testMachine, "n"))
			want := "deprovision hook " + path + " printed malformed output (want a JSON object on stdout): " + tc.shown
			if err == nil || err.Error() != want {
				t.Errorf("err = %.300v\nwant %.300s", err, want)
			}
		})
	}
}

// alive reports whether the process exists and is not a zombie (an orphan
// whose reaper has not reaped it yet is as good as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')') // the state follows the command name
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// sleeperBody starts a child that outlives a plain kill of the hook and
// records both PIDs.
const sleeperBody = `echo $$ > "$HOOK_DIR/hook.pid"
sleep 30 &
echo $! > "$HOOK_DIR/child.pid"
wait
echo '{}'
`

func readPID(t *testing.T, path string) int {
	t.Helper()
	eventually(t, "pid file "+path, func() bool { return lines(path) == 1 })
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestTimeout(t *testing.T) {
	p, path, dir := setup(t, sleeperBody, Config{Timeout: 300 * time.Millisecond})
	err := until(prepare(p, testMachine, testSpec))
	if want := "provision hook " + path + " timed out after 300ms"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	for _, f := range []string{"hook.pid", "child.pid"} {
		pid := readPID(t, filepath.Join(dir, f))
		eventually(t, f+" exits", func() bool { return !alive(pid) })
	}
}

func TestClose(t *testing.T) {
	p, _, dir := setup(t, sleeperBody, Config{})
	if done, err := p.Prepare(context.Background(), testMachine, testSpec); done || err != nil {
		t.Fatalf("Prepare = %v, %v", done, err)
	}
	hook, child := readPID(t, filepath.Join(dir, "hook.pid")), readPID(t, filepath.Join(dir, "child.pid"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the hook itself; its child was killed with it.
	if alive(hook) {
		t.Error("hook still running after Close")
	}
	eventually(t, "child exits", func() bool { return !alive(child) })

	if _, err := p.Prepare(context.Background(), testMachine, testSpec); !errors.Is(err, ErrClosed) {
		t.Errorf("Prepare after Close: %v, want ErrClosed", err)
	}
	if _, err := p.Wipe(context.Background(), testMachine, "c-4", "n"); !errors.Is(err, ErrClosed) {
		t.Errorf("Wipe after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// gatedBody counts its runs and waits for a gate file before succeeding.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	hook := script(t, dir, "sparecap-test-hook", "echo '{}'\n")
	plain := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(plain, []byte("#!/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"", filepath.Join(dir, "missing"), "sparecap-no-such-hook", plain, dir} {
		if p, err := New(Config{Program: prog}); err == nil {
			p.Close()
			t.Errorf("New(%q) succeeded", prog)
		}
	}
	for _, kv := range []string{"NOVALUE", "=value"} {
		if p, err := New(Config{Program: hook, Env: []string{kv}}); err == nil || !strings.Contains(err.Error(), "want KEY=VALUE") {
			if p != nil {
				p.Close()
			}
			t.Errorf("New with Env %q: err = %v", kv, err)
		}
	}

	// A bare name is looked up in $PATH, a relative path made absolute.
	t.Setenv("PATH", dir)
	t.Chdir(dir)
	for _, prog := range []string{"sparecap-test-hook", "./sparecap-test-hook"} {
		p, err := New(Config{Program: prog})
		if err != nil {
			t.Fatalf("New(%q): %v", prog, err)
		}
		p.Close()
		if p.program != hook {
			t.Errorf("New(%q) runs %q, want %q", prog, p.program, hook)
		}
		if p.timeout != DefaultTimeout {
			t.Errorf("timeout %s, want %s", p.timeout, DefaultTimeout)
		}
	}
}

func TestProgramGoneAfterNew(t *testing.T) {
	p, path, _ := setup(t, "echo '{}'\n", Config{})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	err := until(prepare(p, testMachine, testSpec))
	if want := "provision hook " + path + " could not run"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want %s...", err, want)
	}
}

func TestMachineWithoutID(t *testing.T) {
	p, _, _ := setup(t, "echo '{}'\n", Config{})
	if _, err := p.Prepare(context.Background(), domain.Machine{}, testSpec); err == nil {
		t.Error("Prepare of a machine without an ID succeeded")
	}
}

// TestProvisionSlurmNode: a SLURM cluster's node comes with the platform
// and what its machine needs to start slurmd.
func TestProvisionSlurmNode(t *testing.T) {
	p, _, dir := setup(t, recordBody, Config{})
	spec := testSpec
	spec.Platform = domain.ClusterSlurm
	if err := until(prepare(p, testMachine, spec)); err != nil {
		t.Fatal(err)
	}
	got := decodeJSON(t, readFile(t, filepath.Join(dir, "stdin.provision")))
	if got["platform"] != "SLURM" {
		t.Errorf("platform %v", got["platform"])
	}
	node, _ := got["node"].(map[string]any)
	// The node joins with its cluster's feature: no other cluster's driver
	// ever takes it.
	feat := "sparecap,preemptible,sparecap-" + spec.ClusterID
	want := map[string]any{"features": feat, "slurmd_conf": "Gres=gpu:8 Feature=" + feat}
	if !reflect.DeepEqual(node["slurm"], want) {
		t.Errorf("node.slurm %v, want %v", node["slurm"], want)
	}
}
