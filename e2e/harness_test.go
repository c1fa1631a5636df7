package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
)

// adminToken is the admin token every test server gets through
// SPARECAP_ADMIN_TOKEN.
const adminToken = "sc_e2e_admin_token_0123456789abcdef"

var (
	// binary is the sparecap binary TestMain builds.
	binary string
	// fsyncLatency is the measured cost of one write+fsync+rename on this
	// machine's temp file system; the server does several per drain step,
	// so the drain tolerance grows with it.
	fsyncLatency time.Duration
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "sparecap-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: create temp dir: %v\n", err)
		return 2
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "sparecap")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 2
	}
	start := time.Now()
	build := exec.Command("go", "build", "-o", binary, "./cmd/sparecap")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAILED to build the sparecap binary (go build -o %s ./cmd/sparecap in %s): %v\n%s\n", binary, root, err, out)
		return 2
	}
	buildTime := time.Since(start)
	fsyncLatency = measureFsync(dir)
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: built %s in %s; write+fsync+rename takes %s here\n", binary, buildTime.Round(time.Millisecond), fsyncLatency.Round(100*time.Microsecond))
	}
	return m.Run()
}

// moduleRoot is the directory of go.mod above this package.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the e2e package source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the e2e package")
		}
		dir = parent
	}
}

// measureFsync returns the median of a few write+fsync+rename rounds, the
// way the server persists its simulator state.
func measureFsync(dir string) time.Duration {
	var ds []time.Duration
	for i := 0; i < 7; i++ {
		ds = append(ds, measureFsyncOnce(dir))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

var fsyncData = bytes.Repeat([]byte("x"), 8<<10)

// measureFsyncOnce times one write+fsync+rename in dir.
func measureFsyncOnce(dir string) time.Duration {
	start := time.Now()
	tmp := filepath.Join(dir, "fsync.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return 0
	}
	_, _ = f.Write(fsyncData)
	_ = f.Sync()
	_ = f.Close()
	_ = os.Rename(tmp, filepath.Join(dir, "fsync.dat"))
	return time.Since(start)
}

// ---- servers ----

// fleetOnePool is the crash test's fleet: one region and GPU type, three
// on-demand machines of 8 GPUs.
const (
	region  = "us-central-2"
	gpuType = "H100_SXM"
)

// syncBuffer is a bytes.Buffer safe for a subprocess writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serverConfig is what a server process is started with; a restart reuses
// it unchanged.
type serverConfig struct {
	DataDir   string
	DB        string // empty: the SQLite default in DataDir
	FleetFile string
	Speed     float64
	SimSeed   int64
	Addr      string // empty: a free port
	// ConfigPath is SPARECAP_CONFIG for the server (it writes the CLI
	// config there on first start) and for the CLI.
	ConfigPath string
	// Extra flags.
	Extra []string
}

// server is one `sparecap server` process.
type server struct {
	t      *testing.T
	cfg    serverConfig
	n      int // 1 for the first process of a test, 2 for its restart, ...
	URL    string
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
	err    error // of cmd.Wait, valid once exited is closed
}

// serverCount numbers the server processes of each test for the logs.
var serverCount sync.Map // *testing.T -> *int

// startServer starts `sparecap server` and waits until /readyz answers. Its
// output goes to the test log if the test fails.
func startServer(t *testing.T, cfg serverConfig) *server {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := cfg
		if c.Addr == "" {
			c.Addr = freeAddr(t)
		}
		s, err := tryStartServer(t, c)
		if err == nil {
			return s
		}
		lastErr = err
		// Only a port taken between freeAddr and the server's listen is
		// worth another try; with a fixed address there is nothing to vary.
		if cfg.Addr != "" || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("start sparecap server: %v", lastErr)
	return nil
}

func tryStartServer(t *testing.T, cfg serverConfig) (*server, error) {
	t.Helper()
	v, _ := serverCount.LoadOrStore(t, new(int))
	counter := v.(*int)
	*counter++
	s := &server{t: t, cfg: cfg, n: *counter, URL: "http://" + cfg.Addr, output: &syncBuffer{}, exited: make(chan struct{})}
	args := []string{"server",
		"--addr", cfg.Addr,
		"--data-dir", cfg.DataDir,
		"--speed", fmt.Sprint(cfg.Speed),
		"--sim-seed", fmt.Sprint(cfg.SimSeed),
	}
	if cfg.DB != "" {
		args = append(args, "--db", cfg.DB)
	}
	if cfg.FleetFile != "" {
		args = append(args, "--fleet", cfg.FleetFile)
	}
	args = append(args, cfg.Extra...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = append(cleanEnv(), "SPARECAP_ADMIN_TOKEN="+adminToken, "SPARECAP_CONFIG="+cfg.ConfigPath)
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	started := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", binary, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("---- output of sparecap server #%d (%s) ----\n%s---- end of server #%d output ----", s.n, strings.Join(args, " "), s.output.String(), s.n)
		}
	})
	c := client.New(s.URL, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Readyz(ctx)
		cancel()
		if err == nil {
			t.Logf("server #%d ready at %s after %s", s.n, s.URL, time.Since(started).Round(time.Millisecond))
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server #%d exited before it was ready (%v); its output:\n%s", s.n, s.err, s.output.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("server #%d not ready at %s/readyz after 30s (last error: %v); its output:\n%s", s.n, s.URL, err, s.output.String())
		}
	}
}

// kill SIGKILLs the server (if it still runs) and waits for it.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// stop sends SIGTERM and expects a clean exit within 10 seconds.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.err != nil {
			t.Errorf("server #%d: exit after SIGTERM: %v (want a clean exit 0)", s.n, s.err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("server #%d did not exit within 10s of SIGTERM; killing it", s.n)
		s.kill()
	}
}

// anchor reads the clock anchor the server keeps in its data directory: it
// maps the simulated time of events and deadlines to wall time.
func (s *server) anchor(t *testing.T) *clock.Scaled {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.cfg.DataDir, "clock.json"))
	if err != nil {
		t.Fatalf("read the clock anchor of a sped-up server: %v", err)
	}
	var a clock.Anchor
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("parse %s: %v", filepath.Join(s.cfg.DataDir, "clock.json"), err)
	}
	return clock.NewAnchored(a)
}

// wallOf is the wall time at which the anchored clock reads v.
func wallOf(c *clock.Scaled, v time.Time) time.Time {
	a := c.Anchor()
	return a.Real.Add(time.Duration(float64(v.Sub(a.Virtual)) / a.Speed))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// cleanEnv is the test's environment without any SPARECAP_ variable, so
// neither the user's settings nor their config file leak in.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPARECAP_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ---- CLI ----

type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("`sparecap %s` exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs the CLI binary against srv with token, passing both as flags.
func cli(t *testing.T, srv *server, token string, args ...string) cliResult {
	t.Helper()
	full := append([]string{"--url", srv.URL, "--token", token}, args...)
	return cliEnv(t, []string{"SPARECAP_CONFIG=" + srv.cfg.ConfigPath}, full...)
}

// cliEnv runs the CLI binary with extra environment variables.
func cliEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run sparecap %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("sparecap %s did not finish within 60s\n%s", strings.Join(args, " "), r)
	}
	return r
}

// cliJSON runs the CLI (which must succeed) and decodes its JSON output
// into out.
func cliJSON(t *testing.T, srv *server, token string, out any, args ...string) cliResult {
	t.Helper()
	r := cli(t, srv, token, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		t.Fatalf("decode JSON output: %v\n%s", err, r)
	}
	return r
}

// follower is a `sparecap events --cluster <id> --follow -o json`
// subprocess, each printed line decoded as an event.
type follower struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error

	mu     sync.Mutex
	events []apiv1.Event
	bad    []string // lines that were not events
	notify chan struct{}
}

// startFollow starts the follower, passing the server and token through
// SPARECAP_URL and SPARECAP_TOKEN.
func startFollow(t *testing.T, srv *server, token, clusterID string) *follower {
	t.Helper()
	f := &follower{stderr: &syncBuffer{}, exited: make(chan struct{}), notify: make(chan struct{}, 1)}
	f.cmd = exec.Command(binary, "events", "--cluster", clusterID, "--follow", "-o", "json")
	f.cmd.Env = append(cleanEnv(), "SPARECAP_URL="+srv.URL, "SPARECAP_TOKEN="+token, "SPARECAP_CONFIG="+srv.cfg.ConfigPath)
	f.cmd.Stderr = f.stderr
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start sparecap events --follow: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var e apiv1.Event
			f.mu.Lock()
			if err := json.Unmarshal([]byte(line), &e); err != nil || e.Reason == "" {
				f.bad = append(f.bad, line)
			} else {
				f.events = append(f.events, e)
			}
			f.mu.Unlock()
			select {
			case f.notify <- struct{}{}:
			default:
			}
		}
		f.err = f.cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-f.exited:
		default:
			_ = f.cmd.Process.Kill()
			<-f.exited
		}
	})
	return f
}

func (f *follower) snapshot() ([]apiv1.Event, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events), slices.Clone(f.bad)
}

// waitFor waits until the follower has printed an event ok accepts.
func (f *follower) waitFor(t *testing.T, timeout time.Duration, what string, ok func(apiv1.Event) bool) apiv1.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		evs, bad := f.snapshot()
		for _, e := range evs {
			if ok(e) {
				return e
			}
		}
		select {
		case <-f.notify:
		case <-f.exited:
			evs, bad = f.snapshot()
			if i := slices.IndexFunc(evs, ok); i >= 0 {
				return evs[i]
			}
			t.Fatalf("`sparecap events --follow` exited (%v) before printing %s; it printed %d events (%s), non-event lines %q; stderr:\n%s",
				f.err, what, len(evs), reasons(evs), bad, f.stderr.String())
		case <-deadline:
			t.Fatalf("`sparecap events --follow` did not print %s within %s; it printed %d events (%s), non-event lines %q; stderr:\n%s",
				what, timeout, len(evs), reasons(evs), bad, f.stderr.String())
		}
	}
}

// interrupt stops the follower the way a user does (Ctrl-C) and expects
// exit 0.
func (f *follower) interrupt(t *testing.T) {
	t.Helper()
	_ = f.cmd.Process.Signal(os.Interrupt)
	select {
	case <-f.exited:
		if f.err != nil {
			t.Errorf("`sparecap events --follow` after SIGINT: %v (want exit 0); stderr:\n%s", f.err, f.stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("`sparecap events --follow` did not exit within 5s of SIGINT")
		_ = f.cmd.Process.Kill()
		<-f.exited
	}
}

// ---- API helpers ----

// waitCluster polls the cluster through the API until ok accepts it.
func waitCluster(t *testing.T, c *client.Client, id string, timeout time.Duration, what string, ok func(*apiv1.Cluster) bool) *apiv1.Cluster {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *apiv1.Cluster
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl, err := c.GetCluster(ctx, id)
		cancel()
		if err == nil {
			last, lastErr = cl, nil
			if ok(cl) {
				return cl
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s: waited %s for %s; last seen: %s (last error: %v)", id, timeout, what, describeCluster(last), lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describeCluster(c *apiv1.Cluster) string {
	if c == nil {
		return "nothing"
	}
	var nodes []string
	for _, n := range c.GPUWorkerNodes {
		s := fmt.Sprintf("%s(%s,%s)", n.NodeName, n.ComputeClass, n.Status)
		if n.Deadline != nil {
			s += " deadline " + n.Deadline.Format(time.RFC3339Nano)
		}
		nodes = append(nodes, s)
	}
	sort.Strings(nodes)
	u := ""
	if c.TargetUnfulfilled != nil {
		u = fmt.Sprintf(" unfulfilled=%s(%s)", c.TargetUnfulfilled.Reason, c.TargetUnfulfilled.Message)
	}
	return fmt.Sprintf("status=%s num_gpus=%d preemptible=%d/%d%s nodes=[%s]", c.Status, c.NumGPUs,
		c.AllocatedPreemptibleGPUs, c.DesiredPreemptibleGPUs, u, strings.Join(nodes, " "))
}

// allEvents pages through a cluster's events after cursor through the API.
func allEvents(t *testing.T, c *client.Client, clusterID, cursor string) ([]apiv1.Event, string) {
	t.Helper()
	var out []apiv1.Event
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := c.ListEvents(ctx, clusterID, cursor, 50)
		cancel()
		if err != nil {
			t.Fatalf("list events of %s after cursor %q: %v", clusterID, cursor, err)
		}
		out = append(out, page.Events...)
		if len(page.Events) == 0 || page.NextCursor == cursor {
			return out, page.NextCursor
		}
		cursor = page.NextCursor
	}
}

func reasons(evs []apiv1.Event) string {
	var parts []string
	for _, e := range evs {
		p := e.Reason
		if e.NodeName != "" {
			p += "/" + e.NodeName
		}
		parts = append(parts, p+"#"+e.Cursor)
	}
	return strings.Join(parts, ", ")
}

// httpGetJSON is a raw GET with a bearer token, for checks that should not
// go through the Go client.
func httpGetJSON(url, token string, out any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

func jsonDecode(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// apiClient is a client of the server at url whose every exchange is
// checked against the OpenAPI document; a breach fails t when it ends.
func apiClient(t testing.TB, url, token string) *client.Client {
	return client.New(url, token, client.WithHTTPClient(contracttest.Client(t)))
}
