package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

const twoRegionFleet = `
pools:
  - {region: us-central-2, gpu_type: H100_SXM, machines: 3}
  - {region: eu-west-1, gpu_type: L40S, machines: 2}
`

// TestCLIErrors drives the CLI binary into its error paths against a real
// server and checks the exit status and what the user is told.
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, twoRegionFleet)
	cfgPath := filepath.Join(dir, "cli.yaml")
	srv := startServer(t, serverConfig{DataDir: filepath.Join(dir, "data"), FleetFile: fleetFile, Speed: 40, ConfigPath: cfgPath})

	// The server wrote the CLI config on first start: with nothing but
	// SPARECAP_CONFIG the CLI finds the server and the admin token.
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil || cfg.URL != srv.URL || cfg.Token != adminToken {
		t.Fatalf("CLI config written by the server: %+v (err %v); want url %s and the admin token", cfg, err, srv.URL)
	}
	r := cliEnv(t, []string{"SPARECAP_CONFIG=" + cfgPath}, "capacity", "-o", "json")
	var capList apiv1.CapacityList
	if r.code != 0 {
		t.Fatalf("capacity with only the server-written config: %s", r)
	}
	if err := jsonDecode(r.stdout, &capList); err != nil || len(capList.Capacity) != 2 {
		t.Fatalf("capacity -o json: %v; want 2 region/GPU rows\n%s", err, r)
	}

	var one, two apiv1.Project
	cliJSON(t, srv, adminToken, &one, "projects", "create", "one", "-o", "json")
	cliJSON(t, srv, adminToken, &two, "projects", "create", "two", "-o", "json")

	create := func(extra ...string) []string {
		return append([]string{"clusters", "create", "--project-id", "one"}, extra...)
	}
	// The cases share the server and run one after another: each takes a
	// few milliseconds, and the capacity case counts on an idle region.
	var visible apiv1.Cluster
	t.Run("num-gpus not a multiple of 8", func(t *testing.T) {
		r := cli(t, srv, adminToken, create("--name", "twelve", "--region", "us-central-2", "--gpu-type", "H100_SXM", "--num-gpus", "12")...)
		if r.code == 0 || !strings.Contains(r.stderr, "multiple of 8") || !strings.Contains(r.stderr, "12") {
			t.Errorf("want a non-zero exit and a message saying num_gpus must be a multiple of 8 (got 12): %s", r)
		}
	})
	t.Run("unknown region", func(t *testing.T) {
		r := cli(t, srv, adminToken, create("--name", "lost", "--region", "mars-1", "--gpu-type", "H100_SXM", "--num-gpus", "8")...)
		if r.code == 0 || !strings.Contains(r.stderr, "mars-1") || !strings.Contains(r.stderr, "us-central-2") || !strings.Contains(r.stderr, "eu-west-1") {
			t.Errorf("want a non-zero exit and a message naming mars-1 and the known regions us-central-2 and eu-west-1: %s", r)
		}
	})
	t.Run("GPU type not in region", func(t *testing.T) {
		r := cli(t, srv, adminToken, create("--name", "wrong-gpu", "--region", "eu-west-1", "--gpu-type", "H100_SXM", "--num-gpus", "8")...)
		if r.code == 0 || !strings.Contains(r.stderr, "H100_SXM") || !strings.Contains(r.stderr, "L40S") {
			t.Errorf("want a non-zero exit and a message saying eu-west-1 has L40S but no H100_SXM: %s", r)
		}
	})
	t.Run("insufficient capacity", func(t *testing.T) {
		// us-central-2 has 3 machines of 8 H100_SXM, none in use.
		r := cli(t, srv, adminToken, create("--name", "too-big", "--region", "us-central-2", "--gpu-type", "H100_SXM", "--num-gpus", "32")...)
		want := regexp.MustCompile(`insufficient capacity: asked for 32 H100_SXM GPUs in us-central-2; 24 can be had`)
		if r.code == 0 || !want.MatchString(r.stderr) {
			t.Errorf("want a non-zero exit and a message matching %q: %s", want, r)
		}
	})
	t.Run("other project's cluster is not found", func(t *testing.T) {
		// Tenant one creates a cluster with its own token (its project is
		// implied), in eu-west-1 so the capacity case above is unaffected.
		cliJSON(t, srv, one.Token, &visible, "clusters", "create", "--name", "private", "--region", "eu-west-1", "--gpu-type", "L40S", "--num-gpus", "8", "-o", "json")
		if visible.ProjectID != "one" {
			t.Fatalf("cluster created with project one's token belongs to %q", visible.ProjectID)
		}
		id := visible.ClusterID
		if r := cli(t, srv, one.Token, "clusters", "get", id, "-o", "json"); r.code != 0 {
			t.Fatalf("the owner cannot get its cluster: %s", r)
		}
		for _, args := range [][]string{
			{"clusters", "get", id},
			{"nodes", "list", "--cluster", id},
			{"events", "--cluster", id},
			{"clusters", "update", id, "--num-preemptible-gpus", "8"},
			{"clusters", "delete", id},
		} {
			r := cli(t, srv, two.Token, args...)
			if r.code == 0 || !strings.Contains(r.stderr, "not found") || strings.Contains(r.stdout, "private") {
				t.Errorf("project two's token on project one's cluster: want a non-zero exit saying not found, and nothing of the cluster shown: %s", r)
			}
		}
		var list apiv1.ClusterList
		cliJSON(t, srv, two.Token, &list, "clusters", "list", "-o", "json")
		if len(list.Clusters) != 0 {
			t.Errorf("project two lists %d clusters, want none: %+v", len(list.Clusters), list.Clusters)
		}
		if r := cli(t, srv, two.Token, "projects", "list"); r.code == 0 || !strings.Contains(r.stderr, "admin") {
			t.Errorf("a project token on an admin command: want a non-zero exit mentioning the admin token: %s", r)
		}
	})

	// The refused requests created nothing; the one that succeeded is there
	// unharmed.
	var all apiv1.ClusterList
	cliJSON(t, srv, adminToken, &all, "clusters", "list", "-o", "json")
	if len(all.Clusters) != 1 || all.Clusters[0].ClusterName != "private" || all.Clusters[0].NumGPUs != 8 {
		t.Errorf("after the error cases the server holds %+v; want only project one's cluster private (8 GPUs)", all.Clusters)
	}
	srv.stop(t)
}

// TestServerFlagErrors: the server refuses bad Kubernetes and machine
// provider flags at once, naming the flag, and creates nothing.
func TestServerFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--machine-provider", "exec"}, "--machine-provider exec needs --provision-hook"},
		{[]string{"--provision-hook", "/bin/true"}, "--provision-hook needs --machine-provider exec"},
		{[]string{"--machine-provider", "cloud"}, "--machine-provider must be sim, register or exec"},
		{[]string{"--machine-provider", "exec", "--provision-hook", "/nonexistent/hook"}, "/nonexistent/hook"},
		{[]string{"--node-taint", "gpu"}, `--node-taint: taint "gpu": want KEY[=VALUE]:EFFECT`},
		{[]string{"--preemptible-taint", "gpu:Sometimes"}, "effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		{[]string{"--node-label", "bad key=x"}, `--node-label: label "bad key=x"`},
		{[]string{"--kube-timeout", "10ms"}, "--kube-timeout must be at least 1s"},
		{[]string{"--kube-qps", "0"}, "--kube-qps and --kube-burst must be positive"},
		{[]string{"--workers", "0"}, "--workers must be at least 1"},
		{[]string{"--notice-workers", "-5"}, "--notice-workers must be at least 1"},
		{[]string{"--read-timeout", "0s"}, "--read-timeout must be at least 1s"},
		{[]string{"--idle-timeout", "10ms"}, "--idle-timeout must be at least 1s"},
		{[]string{"--max-connections", "0"}, "--max-connections must be at least 1"},
		{[]string{"--max-streams-per-project", "0"}, "--max-streams-per-project must be at least 1"},
		{[]string{"--max-connections-per-address", "-1"}, "--max-connections-per-address must not be negative"},
		{[]string{"--max-tokens-per-project", "0"}, "--max-tokens-per-project must be at least 1"},
		{[]string{"--token-mints-per-minute", "-1"}, "--token-mints-per-minute must not be negative"},
		{[]string{"--budget-writes-per-minute", "-1"}, "--budget-writes-per-minute must not be negative"},
		{[]string{"--budget-alert-retention", "1h"}, "--budget-alert-retention must be at least 24h"},
		{[]string{"--webhook-max-pending", "0"}, "--webhook-max-pending must be at least 1"},
		{[]string{"--rate-limit-token", "-1"}, "must not be negative"},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, `--trusted-proxies: "10.0.0.0/33" is not an address or a CIDR prefix`},
		{[]string{"--webhook-allow-cidr", "intranet"}, `--webhook-allow-cidr: "intranet" is not a CIDR prefix`},
		{[]string{"--webhook-allow-cidr", "10.0.0.0/8", "--webhook-allow-cidr", "10.0.0.0/40"}, `--webhook-allow-cidr: "10.0.0.0/40"`},
		{[]string{"--provision-hook-env", "SITE=a"}, "--provision-hook-env needs --machine-provider exec"},
		{[]string{"--machine-provider", "exec", "--provision-hook", "/bin/true", "--provision-hook-env", "SPARECAP_ADMIN_TOKEN"},
			"--provision-hook-env: SPARECAP_ADMIN_TOKEN: SPARECAP_ variables are the server's own"},
		{[]string{"--machine-provider", "exec", "--provision-hook", "/bin/true", "--provision-hook-env", "NO SUCH=1"}, `--provision-hook-env: "NO SUCH=1": want NAME=VALUE`},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		args := append([]string{"server", "--addr", "127.0.0.1:0", "--data-dir", dir}, tc.args...)
		r := cliEnv(t, []string{"SPARECAP_CONFIG=" + filepath.Join(t.TempDir(), "cli.yaml")}, args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("want a non-zero exit and %q: %s", tc.want, r)
		}
		// Refused before anything was opened: no data directory.
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: the refused server created %s", tc.args, dir)
		}
	}
}

// TestDemo runs `sparecap demo` to completion.
func TestDemo(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "demo")
	// Everything the demo could touch points into the test's directory.
	cmd.Env = append(cleanEnv(), "TMPDIR="+tmp, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "SPARECAP_CONFIG="+filepath.Join(home, "cli.yaml"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("sparecap demo did not finish within 150s; output so far:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("sparecap demo: %v (want exit 0); output:\n%s", err, out.String())
	}
	t.Logf("sparecap demo finished in %s", took.Round(time.Millisecond))
	// The real job: notice checkpoint, resume on the refilled node, no
	// step lost.
	for _, want := range []string{"PreemptionNotified", "NodeRemoved", "TargetFulfilled", "pod trainer-1 reads its deadline",
		"0 steps lost;", "resuming from its checkpoint at step", "completed all 800 steps", "1 reclaim(s): 0 steps lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %s:\n%s", want, out.String())
		}
	}
	// "It leaves nothing behind."
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("the demo left %v in its temporary directory", names)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the demo wrote into HOME/XDG directories: %v", names)
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out.String())
	}
}
