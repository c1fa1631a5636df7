package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// TestServesEverything starts the whole process on loopback and checks
// that every part is wired: the API, usage with the meter, and /metrics.
func TestServesEverything(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef", Speed: 100,
		ConfigPath: filepath.Join(dir, "cli.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.New(srv.URL, "adm-0123456789abcdef0123456789abcdef")
	p, err := c.CreateProject(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	tc := client.New(srv.URL, p.Token)
	cl, err := tc.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "a", Region: "us-central-2", GPUType: "RTX_6000_PCI", NumGPUs: 8, NumPreemptibleGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := tc.GetCluster(ctx, cl.ClusterID)
		if err == nil && got.Status == "Ready" && got.AllocatedPreemptibleGPUs == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ready: %+v %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // 30 simulated seconds of usage
	now := srv.Clock.Now()
	u, err := tc.Usage(ctx, client.UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.LineItems) != 2 || u.Totals.GPUSeconds == 0 || u.ByClass["preemptible"].Savings == "0.00" && u.ByClass["preemptible"].GPUSeconds > 3600 {
		t.Fatalf("usage %+v", u)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sparecap_cluster_desired_preemptible_gpus{cluster_id="` + cl.ClusterID + `",project_id="team"} 8`,
		`sparecap_nodes{class="preemptible",state="ready"} 1`,
		`sparecap_http_request_duration_seconds_count{code="201",method="POST",route="/v1/clusters"} 1`,
		`sparecap_billed_gpu_seconds_total{class="standard"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestPprof: --pprof-addr serves the profiling endpoints on a listener of
// their own, and only there.
func TestPprof(t *testing.T) {
	dir := t.TempDir()
	srv, err := Start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef",
		ConfigPath: filepath.Join(dir, "cli.yaml"), PprofAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := get(srv.PprofURL + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("profiling listener: %d, want 200", code)
	}
	if code := get(srv.URL + "/debug/pprof/goroutine?debug=1"); code == http.StatusOK {
		t.Errorf("the API listener serves the profiles too (%d)", code)
	}
}

// TestAtLeastReal: background passes keep their clock-time period, and on
// a fast clock run no more often than their real-time floor.
func TestAtLeastReal(t *testing.T) {
	for _, tc := range []struct {
		speed float64
		want  time.Duration
	}{{1, time.Minute}, {6, time.Minute}, {60, 10 * time.Minute}, {600, 100 * time.Minute}} {
		if got := atLeastReal(time.Minute, 10*time.Second, tc.speed); got != tc.want {
			t.Errorf("speed %g: every %s, want %s", tc.speed, got, tc.want)
		}
	}
}

// TestFilesAreOwnerOnly: the server creates its files (the database with
// its WAL and shared-memory files, the sealing key, the admin token) with
// mode 0600, whatever the umask, and tightens a data directory and files
// an older version or a person left open to others.
func TestFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	check := func(t *testing.T, dir string) {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("data dir %s: mode %v, %v; want 0700", dir, fi.Mode().Perm(), err)
		}
		entries, _ := os.ReadDir(dir)
		seen := map[string]bool{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			seen[e.Name()] = true
			if mode := info.Mode().Perm(); mode != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", e.Name(), mode)
			}
		}
		for _, want := range []string{"sparecap.db", "sparecap.db-wal", "sparecap.db-shm", "admin-token"} {
			if !seen[want] {
				t.Errorf("%s was not created (files: %v)", want, seen)
			}
		}
	}
	start := func(t *testing.T, dir string) *Server {
		t.Helper()
		srv, err := Start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, ConfigPath: filepath.Join(t.TempDir(), "cli.yaml")})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	t.Run("new", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		srv := start(t, dir)
		defer srv.Close()
		check(t, dir)
	})
	t.Run("open to others", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		srv := start(t, dir)
		srv.Close()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.Chmod(filepath.Join(dir, e.Name()), 0o644)
		}
		os.Remove(filepath.Join(dir, "sparecap.db-wal"))
		os.Remove(filepath.Join(dir, "sparecap.db-shm"))
		srv = start(t, dir)
		defer srv.Close()
		check(t, dir)
	})
}
