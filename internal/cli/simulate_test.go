package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/docs"
)

// snippetFile writes a snippet of docs/planning.md to a file, as a user
// saves it.
func snippetFile(t *testing.T, name, file string) string {
	t.Helper()
	text, err := docs.Snippet("planning.md", name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSimulate runs docs/planning.md's scenario and trace as its
// commands do (over a shorter horizon), in every output format, and
// refuses bad input without running.
func TestSimulate(t *testing.T) {
	ctx := context.Background()
	week := snippetFile(t, "week-scenario", "week.yaml")
	trace := snippetFile(t, "trace", "demand.csv")
	e := testEnv(nil)

	r := runCLI(ctx, e, "simulate", week, "--horizon", "12h")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "table", r.stdout, "Seed 7, horizon 12h0m0s", "OPERATOR", "cooldown-30s", "cooldown-30m", "Preemptible GPU-hours",
		"tenant-1-us-east-1-h100-sxm")
	if r.stderr != "" {
		t.Errorf("progress on a non-terminal without --progress: %q", r.stderr)
	}

	r = runCLI(ctx, e, "simulate", week, "--horizon", "12h", "--seed", "9", "-o", "json", "--progress")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var c struct {
		Seed uint64
		Runs []struct {
			Policy struct{ Name string }
			Series []struct{ Idle int }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || c.Seed != 9 || len(c.Runs) != 2 || c.Runs[1].Policy.Name != "cooldown-30m" || len(c.Runs[0].Series) != 121 {
		t.Errorf("json: %v %+v", err, c)
	}
	mustContain(t, "progress", r.stderr, "cooldown-30s", "100%")

	r = runCLI(ctx, e, "simulate", week, "--trace", trace, "--horizon", "6h", "-o", "csv")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "csv", r.stdout, "policy,scope,name,metric,value\n", "cooldown-30s,tenant,train,reclaims,8\n", "cooldown-30s,operator,,on_demand_requests,1\n",
		"cooldown-30m,series,21600,idle_gpus,")

	// An Alibaba trace on its own node list, with the scenario's prices.
	dir := t.TempDir()
	pods, nodes, priced := filepath.Join(dir, "pods.csv"), filepath.Join(dir, "nodes.csv"), filepath.Join(dir, "priced.yaml")
	os.WriteFile(pods, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"p1,1000,1024,8,1000,V100M16,BE,Running,0,,1\np2,1000,1024,8,1000,V100M16,LS,Running,3600,7200,3601\n"), 0o600)
	os.WriteFile(nodes, []byte("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M16\n"), 0o600)
	os.WriteFile(priced, []byte("horizon: 3h\nfleet: {prices: {V100M16: \"2.48\"}}\n"), 0o600)
	r = runCLI(ctx, e, "simulate", priced, "--trace-format", "alibaba-gpu-2023", "--trace", pods, "--nodes", nodes, "-o", "csv")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "alibaba csv", r.stdout, "policy,tenant,alibaba-preemptible-v100m16,reclaims,1\n", "policy,operator,,fleet_gpu_hours,24\n")

	// A fleet file replaces the scenario's fleet.
	fleetFile := filepath.Join(dir, "fleet.yaml")
	os.WriteFile(fleetFile, []byte("pools: [{region: us-east-1, gpu_type: H100_SXM, machines: 2}]\nprices: {H100_SXM: \"2.99\"}\n"), 0o600)
	r = runCLI(ctx, e, "simulate", week, "--fleet", fleetFile, "--horizon", "1h", "-o", "csv")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "fleet file csv", r.stdout, "cooldown-30s,operator,,fleet_gpu_hours,16\n")

	// Gangs (docs/planning.md#gangs): the week's scenario with gang_gpus
	// added to its jobs.
	text, _ := os.ReadFile(week)
	gangs := filepath.Join(dir, "gangs.yaml")
	os.WriteFile(gangs, []byte(strings.Replace(string(text), "jobs:\n", "jobs:\n  gang_gpus: 32\n", 1)), 0o600)
	r = runCLI(ctx, e, "simulate", gangs, "--horizon", "12h")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "gang table", r.stdout, "GANG WAIT GPU-H")
	r = runCLI(ctx, e, "simulate", gangs, "--horizon", "12h", "-o", "csv")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "gang csv", r.stdout, "cooldown-30s,tenant,tenant-1-us-east-1-h100-sxm,gang_wait_gpu_hours,")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("horizon: 1h\nfleet: {pools: [{region: r, gpu_type: G, machines: 1}]}\ntenants: {count: 1, target_gpus: 12}\n"), 0o600)
	badGang := filepath.Join(t.TempDir(), "bad-gang.yaml")
	os.WriteFile(badGang, []byte("horizon: 1h\nfleet: {pools: [{region: r, gpu_type: G, machines: 1}]}\njobs: {gang_gpus: 20}\n"), 0o600)
	badTrace := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(badTrace, []byte("at,cluster,region,gpu_type,class,gpus\n0,a,r,G,spot,8\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate"}, "accepts 1 arg"},
		{[]string{"simulate", filepath.Join(t.TempDir(), "none.yaml")}, "read the scenario"},
		{[]string{"simulate", bad}, "12 GPUs is not a multiple of 8"},
		{[]string{"simulate", badGang}, "jobs.gang_gpus: 20 GPUs is not a multiple of 8"},
		{[]string{"simulate", week, "--horizon", "10000h"}, "horizon must be above 0"},
		{[]string{"simulate", week, "--trace", badTrace}, "trace line 2: class \"spot\""},
		{[]string{"simulate", week, "-o", "xml"}, "use table, json, yaml or csv"},
		{[]string{"simulate", week, "--trace-format", "borg", "--trace", trace}, "unknown trace format"},
		{[]string{"simulate", week, "--fleet", trace}, "parse"},
		{[]string{"simulate", week, "--trace-format", "sparecap", "--nodes", trace}, "node lists are read for"},
	} {
		r := runCLI(ctx, e, c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.args, r.err, c.want)
		}
		if r.stdout != "" {
			t.Errorf("%v printed %q", c.args, r.stdout)
		}
	}
}
