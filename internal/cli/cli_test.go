package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func node(name, class, status string, deadline *time.Time) apiv1.Node {
	return apiv1.Node{NodeID: "n-" + name, NodeName: name, ComputeClass: class, Status: status, NumGPUs: 8, GPUType: "H100",
		CreatedAt: t0.Add(-3 * time.Minute), Deadline: deadline}
}

func cluster(status string, allocated int, nodes ...apiv1.Node) apiv1.Cluster {
	return apiv1.Cluster{
		ClusterID: "c1", ClusterName: "my-cluster", ProjectID: "p1", Region: "us-central-2", GPUType: "H100",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", Status: status, NumGPUs: 8,
		DesiredPreemptibleGPUs: 16, TargetPreemptibleGPUs: 16, AllocatedPreemptibleGPUs: allocated, GPUWorkerNodes: nodes,
		CreatedAt: t0.Add(-90 * time.Minute),
	}
}

func TestClustersCreateSendsFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want map[string]any
	}{
		{
			name: "all flags",
			args: []string{"--name", "my-cluster", "--region", "us-central-2", "--gpu-type", "RTX_6000_PCI",
				"--cluster-type", "KUBERNETES", "--num-gpus", "8", "--billing-type", "RESERVED",
				"--num-preemptible-gpus", "16", "--max-preemptible-gpus", "64", "--project-id", "p1"},
			want: map[string]any{"cluster_name": "my-cluster", "region": "us-central-2", "gpu_type": "RTX_6000_PCI",
				"cluster_type": "KUBERNETES", "num_gpus": 8.0, "billing_type": "RESERVED",
				"num_preemptible_gpus": 16.0, "max_preemptible_gpus": 64.0, "project_id": "p1"},
		},
		{
			name: "preemptible types, strategy and cap",
			args: []string{"--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8",
				"--preemptible-gpu-types", "H100,H200", "--preemptible-strategy", "lowest-price", "--max-preemptible-per-gpu-hour", "1.60"},
			want: map[string]any{"cluster_name": "a", "region": "r", "gpu_type": "H100",
				"cluster_type": "KUBERNETES", "num_gpus": 8.0, "billing_type": "ON_DEMAND", "num_preemptible_gpus": 0.0,
				"preemptible_gpu_types": []any{"H100", "H200"}, "preemptible_strategy": "lowest-price", "max_preemptible_per_gpu_hour": "1.60"},
		},
		{
			name: "defaults; no project with a project token",
			args: []string{"--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "16"},
			want: map[string]any{"cluster_name": "a", "region": "r", "gpu_type": "H100",
				"cluster_type": "KUBERNETES", "num_gpus": 16.0, "billing_type": "ON_DEMAND",
				"num_preemptible_gpus": 0.0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.handle("POST /v1/clusters", 201, cluster("WaitingForDataPlaneNodes", 0))
			r := f.run(append([]string{"clusters", "create"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("err: %v\n%s", r.err, r.stderr)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests = %v, want one POST", reqs)
			}
			if reqs[0].Auth != "Bearer tok-1" {
				t.Errorf("auth = %q", reqs[0].Auth)
			}
			if !reflect.DeepEqual(reqs[0].Body, tc.want) {
				t.Errorf("body = %v\nwant %v", reqs[0].Body, tc.want)
			}
			mustContain(t, "stdout", r.stdout, "c1", "WaitingForDataPlaneNodes")
		})
	}
}

func TestClustersCreateRequiredFlags(t *testing.T) {
	full := map[string]string{"name": "a", "region": "r", "gpu-type": "H100", "num-gpus": "8"}
	for missing := range full {
		t.Run(missing, func(t *testing.T) {
			f := newFakeAPI(t)
			args := []string{"clusters", "create"}
			for k, v := range full {
				if k != missing {
					args = append(args, "--"+k, v)
				}
			}
			r := f.run(args...)
			if r.err == nil || !strings.Contains(r.err.Error(), fmt.Sprintf("required flag(s) %q not set", missing)) {
				t.Errorf("err = %v, want required flag %q", r.err, missing)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestClustersUpdateSendsOnlyChanged(t *testing.T) {
	cases := []struct {
		args []string
		want map[string]any
	}{
		{[]string{"--num-preemptible-gpus", "16"}, map[string]any{"num_preemptible_gpus": 16.0}},
		{[]string{"--num-preemptible-gpus", "0"}, map[string]any{"num_preemptible_gpus": 0.0}},
		{[]string{"--num-gpus", "16"}, map[string]any{"num_gpus": 16.0}},
		{[]string{"--num-gpus=24", "--num-preemptible-gpus=8"}, map[string]any{"num_gpus": 24.0, "num_preemptible_gpus": 8.0}},
		{[]string{"--max-preemptible-gpus", "64"}, map[string]any{"max_preemptible_gpus": 64.0}},
		{[]string{"--max-preemptible-gpus", "0", "--num-preemptible-gpus", "8"}, map[string]any{"max_preemptible_gpus": 0.0, "num_preemptible_gpus": 8.0}},
		{[]string{"--preemptible-gpu-types", "H200,H100"}, map[string]any{"preemptible_gpu_types": []any{"H200", "H100"}}},
		{[]string{"--preemptible-gpu-types", ""}, map[string]any{"preemptible_gpu_types": []any{}}},
		{[]string{"--preemptible-strategy", "capacity-optimized"}, map[string]any{"preemptible_strategy": "capacity-optimized"}},
		{[]string{"--max-preemptible-per-gpu-hour", "1.60"}, map[string]any{"max_preemptible_per_gpu_hour": "1.60"}},
		{[]string{"--max-preemptible-per-gpu-hour", ""}, map[string]any{"max_preemptible_per_gpu_hour": ""}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFakeAPI(t)
			f.handle("PATCH /v1/clusters/{id}", 200, cluster("Ready", 0))
			r := f.run(append([]string{"clusters", "update", "c1"}, tc.args...)...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			reqs := f.only("PATCH", "/v1/clusters/c1")
			if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, tc.want) {
				t.Errorf("requests = %+v, want one PATCH with %v", reqs, tc.want)
			}
		})
	}

	f := newFakeAPI(t)
	r := f.run("clusters", "update", "c1")
	if r.err == nil || !strings.Contains(r.err.Error(), "nothing to update") {
		t.Errorf("no flags: err = %v", r.err)
	}
	r = f.run("clusters", "update", "--num-gpus", "8")
	if r.err == nil || !strings.Contains(r.err.Error(), "accepts 1 arg") {
		t.Errorf("no id: err = %v", r.err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestClusterGetShowsTheQueue: a cluster whose target follows its queue
// says so, with what the tenant set, what the queue asks and the maximum.
func TestClusterGetShowsTheQueue(t *testing.T) {
	c := cluster("Ready", 16)
	c.MaxPreemptibleGPUs, c.RequestedPreemptibleGPUs, c.TargetPreemptibleGPUs = 64, 40, 40
	c.TargetUnfulfilled = &apiv1.Unfulfilled{Reason: "Provisioning", Message: "3 nodes coming up"}
	f := newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, c)
	r := f.run("clusters", "get", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "table", r.stdout,
		"Preemptible GPUs:   16 allocated / 40 target (16 set, 40 requested by the queue, at most 64) (Provisioning: 3 nodes coming up)")
	f.handle("GET /v1/clusters", 200, apiv1.ClusterList{Clusters: []apiv1.Cluster{c}})
	r = f.run("clusters", "list")
	mustContain(t, "list", r.stdout, "16/40")
}

func TestOutputFormats(t *testing.T) {
	deadline := t0.Add(4*time.Minute + 12*time.Second)
	want := cluster("Ready", 8,
		node("gpu-dp-1", "standard", "ready", nil),
		node("gpu-preemptible-dp-2", "preemptible", "draining", &deadline))
	want.TargetUnfulfilled = &apiv1.Unfulfilled{Reason: "NoSpareCapacity", Message: "no spare H100 in us-central-2"}

	f := newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, want)

	r := f.run("clusters", "get", "c1", "-o", "json")
	var got apiv1.Cluster
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &got) != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("-o json: err %v, output:\n%s", r.err, r.stdout)
	}
	if !strings.Contains(r.stdout, "\n  \"cluster_id\": \"c1\"") {
		t.Errorf("-o json is not pretty-printed:\n%s", r.stdout)
	}

	r = f.run("clusters", "get", "c1", "--output=yaml")
	got = apiv1.Cluster{}
	if r.err != nil || yaml.Unmarshal([]byte(r.stdout), &got) != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("-o yaml: err %v, output:\n%s", r.err, r.stdout)
	}
	mustContain(t, "yaml", r.stdout, "cluster_id: c1\n", "desired_preemptible_gpus: 16\n")

	r = f.run("clusters", "get", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "table", r.stdout,
		"Status:             Ready",
		"Standard GPUs:      8 (1/1 nodes ready)",
		"Preemptible GPUs:   8 allocated / 16 desired (NoSpareCapacity: no spare H100 in us-central-2)",
		"Created:            2025-03-04 08:30:00 (1h30m ago)",
		"NAME                   CLASS         STATUS     GPUS   GPU TYPE   AGE    DEADLINE",
		"gpu-dp-1               standard      ready      8      H100       3m0s   -",
		"gpu-preemptible-dp-2   preemptible   draining   8      H100       3m0s   2025-03-04T10:04:12Z (in 4m12s)")

	r = f.run("nodes", "list", "--cluster", "c1")
	mustContain(t, "nodes list", r.stdout, "gpu-preemptible-dp-2   preemptible   draining   8      H100       3m0s   2025-03-04T10:04:12Z (in 4m12s)")
	r = f.run("nodes", "list", "--cluster", "c1", "-o", "json")
	mustContain(t, "nodes list json", r.stdout, `"gpu_worker_nodes": [`, `"deadline": "2025-03-04T10:04:12Z"`)

	before := len(f.requests())
	r = f.run("clusters", "get", "c1", "-o", "xml")
	if r.err == nil || !strings.Contains(r.err.Error(), `unknown output format "xml"`) {
		t.Errorf("-o xml: err = %v", r.err)
	}
	mustContain(t, "stderr", r.stderr, `Error: unknown output format "xml" for -o/--output: use table, json or yaml`)
	if len(f.requests()) != before {
		t.Error("a bad -o still called the API")
	}
}

func TestListTables(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/clusters", 200, apiv1.ClusterList{Clusters: []apiv1.Cluster{cluster("Ready", 8)}})
	f.handle("GET /v1/capacity", 200, apiv1.CapacityList{Capacity: []apiv1.Capacity{{Region: "us-central-2", GPUType: "H100",
		Total: 128, AvailableOnDemand: 32, AvailablePreemptible: 48, Reserved: 64, InUseStandard: 40, InUsePreemptible: 24, OutOfService: 8}}})
	f.handle("GET /v1/admin/projects", 200, apiv1.ProjectList{Projects: []apiv1.Project{{ProjectID: "p1", CreatedAt: t0.Add(-2 * time.Hour)}}})
	f.handle("GET /v1/admin/machines", 200, apiv1.MachineList{Machines: []apiv1.Machine{{MachineID: "m1", Region: "r", GPUType: "H100", GPUs: 8, Pool: "on-demand", State: "free"}}})
	f.handle("GET /v1/admin/reservations", 200, apiv1.ReservationList{Reservations: []apiv1.Reservation{{ReservationID: "res1", ProjectID: "p1", Region: "r", GPUType: "H100", Machines: 2, GPUs: 16, LentGPUs: 8, CreatedAt: t0.Add(-26 * time.Hour)}}})

	cases := []struct {
		args  []string
		wants []string
	}{
		{[]string{"clusters", "list", "--project-id", "p1"}, []string{
			"ID   NAME         PROJECT   REGION         GPU_TYPE   STATUS   GPUS   PREEMPTIBLE   KUBERNETES   AGE",
			"c1   my-cluster   p1        us-central-2   H100       Ready    8      8/16          -            1h30m"}},
		{[]string{"capacity"}, []string{
			"REGION         GPU_TYPE   TOTAL   ON_DEMAND_AVAIL   PREEMPTIBLE_AVAIL   RESERVED   STD_IN_USE   PREEMPT_IN_USE   OUT_OF_SERVICE",
			"us-central-2   H100       128     32                48                  64         40           24               8"}},
		{[]string{"projects", "list"}, []string{"PROJECT   CREATED", "p1        2025-03-04 08:00:00 (2h0m ago)"}},
		{[]string{"machines", "list", "--region", "r", "--state", "free"}, []string{
			"ID   REGION   GPU_TYPE   GPUS   POOL        STATE   CLUSTER   NODE",
			"m1   r        H100       8      on-demand   free    -         -"}},
		{[]string{"reservations", "list"}, []string{"res1   p1        r        H100       2          16     8                  1d2h"}},
	}
	for _, tc := range cases {
		r := f.run(tc.args...)
		if r.err != nil {
			t.Errorf("%v: %v", tc.args, r.err)
			continue
		}
		mustContain(t, strings.Join(tc.args, " "), r.stdout, tc.wants...)
	}
	if q := f.only("GET", "/v1/clusters")[0].Query; q != "project_id=p1" {
		t.Errorf("clusters list query = %q", q)
	}
	if q := f.only("GET", "/v1/admin/machines")[0].Query; q != "region=r&state=free" {
		t.Errorf("machines list query = %q", q)
	}
}

func TestAdminWrites(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/admin/projects", 201, apiv1.Project{ProjectID: "team-ml", Token: "sc_p_secret", CreatedAt: t0})
	f.handle("POST /v1/admin/machines", 201, apiv1.MachineList{Machines: []apiv1.Machine{{MachineID: "m1"}, {MachineID: "m2"}}})
	f.handle("PATCH /v1/admin/machines/{id}", 200, apiv1.Machine{MachineID: "m1", State: "free"})
	f.handle("POST /v1/admin/reservations", 201, apiv1.Reservation{ReservationID: "res1", ProjectID: "team-ml"})

	r := f.run("projects", "create", "team-ml")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "Project:   team-ml", "Token:     sc_p_secret")
	mustContain(t, "stderr", r.stderr, "shown only once")
	if b := f.only("POST", "/v1/admin/projects")[0].Body; !reflect.DeepEqual(b, map[string]any{"project_id": "team-ml"}) {
		t.Errorf("project body = %v", b)
	}
	r = f.run("projects", "create", "team-ml", "-o", "json")
	var p apiv1.Project
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.Token != "sc_p_secret" {
		t.Errorf("projects create -o json: %v %q", err, r.stdout)
	}

	f.handle("POST /v1/admin/projects/{id}/tokens", 201, apiv1.Project{ProjectID: "team-ml", Token: "sc_second", CreatedAt: t0})
	r = f.run("projects", "token", "team-ml")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "Token:     sc_second")
	if n := len(f.only("POST", "/v1/admin/projects/team-ml/tokens")); n != 1 {
		t.Errorf("token requests = %d", n)
	}

	r = f.run("machines", "add", "--region", "r", "--gpu-type", "H100", "--count", "2", "--reservation", "res1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := map[string]any{"region": "r", "gpu_type": "H100", "count": 2.0, "gpus_per_machine": 8.0, "reservation_id": "res1"}
	if b := f.only("POST", "/v1/admin/machines")[0].Body; !reflect.DeepEqual(b, want) {
		t.Errorf("machines add body = %v", b)
	}
	if r = f.run("machines", "add", "--region", "r", "--gpu-type", "H100"); r.err == nil {
		t.Error("machines add without --count succeeded")
	}

	for _, v := range []bool{true, false} {
		r = f.run("machines", "set", "m1", fmt.Sprintf("--out-of-service=%v", v))
		if r.err != nil {
			t.Fatal(r.err)
		}
		reqs := f.only("PATCH", "/v1/admin/machines/m1")
		if b := reqs[len(reqs)-1].Body; !reflect.DeepEqual(b, map[string]any{"out_of_service": v}) {
			t.Errorf("machines set body = %v", b)
		}
	}
	if r = f.run("machines", "set", "m1"); r.err == nil || !strings.Contains(r.err.Error(), "--out-of-service") {
		t.Errorf("machines set without flag: %v", r.err)
	}

	r = f.run("reservations", "create", "--project-id", "team-ml", "--region", "r", "--gpu-type", "H100", "--id", "res1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want = map[string]any{"project_id": "team-ml", "region": "r", "gpu_type": "H100", "reservation_id": "res1"}
	if b := f.only("POST", "/v1/admin/reservations")[0].Body; !reflect.DeepEqual(b, want) {
		t.Errorf("reservations create body = %v", b)
	}
}

func TestAPIErrorPrinted(t *testing.T) {
	f := newFakeAPI(t)
	f.sequence("POST /v1/clusters", apiErr(409, "insufficient_capacity", "only 8 H100 GPUs available in us-central-2"))
	f.sequence("GET /v1/admin/projects", apiErr(403, "permission_denied", "admin token required"))

	r := f.run("clusters", "create", "--name", "a", "--region", "us-central-2", "--gpu-type", "H100", "--num-gpus", "16")
	if r.err == nil {
		t.Fatal("want an error")
	}
	mustContain(t, "stderr", r.stderr, "Error: create cluster: 409 insufficient_capacity: only 8 H100 GPUs available in us-central-2")
	if strings.Contains(r.stderr, "Usage:") {
		t.Errorf("usage printed on an API error:\n%s", r.stderr)
	}
	r = f.run("projects", "list")
	mustContain(t, "stderr", r.stderr, "403 permission_denied: admin token required", "admin commands need the admin token")
}

func TestClustersCreateWait(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/clusters", 201, cluster("WaitingForDataPlaneNodes", 0))
	f.sequence("GET /v1/clusters/c1",
		ok(cluster("WaitingForDataPlaneNodes", 0, node("gpu-dp-1", "standard", "provisioning", nil))),
		func(w http.ResponseWriter) { writeJSON(w, 503, "restarting") },
		ok(cluster("WaitingForDataPlaneNodes", 0, node("gpu-dp-1", "standard", "provisioning", nil))),
		ok(cluster("Ready", 8, node("gpu-dp-1", "standard", "ready", nil), node("gpu-preemptible-dp-2", "preemptible", "ready", nil))),
		ok(cluster("Degraded", 0)), // never reached
	)
	r := f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8", "--wait", "-o", "json")
	if r.err != nil {
		t.Fatalf("err %v\n%s", r.err, r.stderr)
	}
	if n := len(f.only("GET", "/v1/clusters/c1")); n != 4 {
		t.Errorf("%d polls, want 4", n)
	}
	var got apiv1.Cluster
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Status != "Ready" {
		t.Errorf("stdout is not the Ready cluster: %v\n%s", err, r.stdout)
	}
	mustContain(t, "stderr", r.stderr,
		"[    0s] status WaitingForDataPlaneNodes, standard nodes 0/1 ready, preemptible GPUs 0/16 allocated\n",
		"[    1s] status WaitingForDataPlaneNodes, standard nodes 0/1 ready, preemptible GPUs 0/16 allocated; gpu-dp-1 provisioning\n",
		"warning: 503 http_503: \"restarting\" (retrying)",
		"[    4s] status Ready, standard nodes 1/1 ready, preemptible GPUs 8/16 allocated\n")
	// An unchanged state is not printed again.
	if n := strings.Count(r.stderr, "gpu-dp-1 provisioning"); n != 2 {
		t.Errorf("provisioning line printed %d times, want 2 (once, and again after the warning):\n%s", n, r.stderr)
	}
}

func TestClustersWaitTimeout(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/clusters", 201, cluster("WaitingForDataPlaneNodes", 0))
	f.handle("GET /v1/clusters/c1", 200, cluster("WaitingForDataPlaneNodes", 0))
	r := f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8", "--wait", "--timeout", "5s")
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out after 5s waiting for cluster c1 to be Ready") {
		t.Fatalf("err = %v", r.err)
	}
	if n := len(f.only("GET", "/v1/clusters/c1")); n != 5 {
		t.Errorf("%d polls in 5s at 1s, want 5", n)
	}
	if r.stdout != "" {
		t.Errorf("stdout on timeout: %q", r.stdout)
	}
}

func TestClustersWaitStopsOnClientError(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("PATCH /v1/clusters/c1", 200, cluster("WaitingForDataPlaneNodes", 0))
	f.sequence("GET /v1/clusters/c1", apiErr(404, "not_found", "cluster c1 not found"))
	r := f.run("clusters", "update", "c1", "--num-gpus", "16", "--wait")
	if !client.IsNotFound(r.err) {
		t.Errorf("err = %v, want the 404", r.err)
	}
}

func TestClustersUpdateWaitSettles(t *testing.T) {
	deadline := t0.Add(5 * time.Minute)
	f := newFakeAPI(t)
	// Lowering the target: Ready all along, but a node drains first.
	f.handle("PATCH /v1/clusters/c1", 200, cluster("Ready", 16,
		node("gpu-dp-1", "standard", "ready", nil), node("gpu-preemptible-dp-2", "preemptible", "draining", &deadline)))
	f.sequence("GET /v1/clusters/c1",
		ok(cluster("Ready", 8, node("gpu-dp-1", "standard", "ready", nil), node("gpu-preemptible-dp-2", "preemptible", "removing", &deadline))),
		ok(func() apiv1.Cluster {
			c := cluster("Ready", 0, node("gpu-dp-1", "standard", "ready", nil), node("gpu-preemptible-dp-3", "preemptible", "provisioning", nil))
			c.TargetUnfulfilled = &apiv1.Unfulfilled{Reason: "Provisioning"}
			return c
		}()),
		ok(cluster("Ready", 8, node("gpu-dp-1", "standard", "ready", nil), node("gpu-preemptible-dp-3", "preemptible", "ready", nil))),
	)
	r := f.run("clusters", "update", "c1", "--num-preemptible-gpus", "8", "--wait")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := len(f.only("GET", "/v1/clusters/c1")); n != 3 {
		t.Errorf("%d polls, want 3", n)
	}
	mustContain(t, "stderr", r.stderr, "gpu-preemptible-dp-2 draining", "gpu-preemptible-dp-2 removing", "(Provisioning); gpu-preemptible-dp-3 provisioning")
	mustContain(t, "stdout", r.stdout, "gpu-preemptible-dp-3   preemptible   ready")
}

func TestClustersDeleteWait(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("DELETE /v1/clusters/c1", 202, cluster("Deleting", 8, node("gpu-dp-1", "standard", "draining", nil)))
	f.sequence("GET /v1/clusters/c1",
		ok(cluster("Deleting", 0, node("gpu-dp-1", "standard", "removing", nil))),
		apiErr(404, "not_found", "cluster c1 not found"))
	r := f.run("clusters", "delete", "c1", "--wait")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.stdout != "cluster c1 deleted\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	mustContain(t, "stderr", r.stderr, "status Deleting, 1 nodes left", "cluster gone")

	r = f.run("clusters", "delete", "c1")
	if r.err != nil || r.stdout != "cluster c1 is being deleted\n" {
		t.Errorf("delete without wait: %v %q", r.err, r.stdout)
	}
}

func eventAt(cursor, reason, node, msg string, ts time.Time, deadline *time.Time) apiv1.Event {
	return apiv1.Event{EventID: "e" + cursor, Cursor: cursor, ClusterID: "c1", NodeName: node, Reason: reason, Message: msg, Timestamp: ts, Deadline: deadline}
}

func TestEventsList(t *testing.T) {
	deadline := t0.Add(4*time.Minute + 12*time.Second)
	f := newFakeAPI(t)
	// Two pages, then an empty page with the same cursor: the end.
	f.mux.HandleFunc("GET /v1/clusters/c1/events", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			writeJSON(w, 200, apiv1.EventList{NextCursor: "1", Events: []apiv1.Event{
				eventAt("1", "NodeAdded", "gpu-preemptible-dp-2", "node added", t0.Add(-time.Hour), nil)}})
		case "1":
			writeJSON(w, 200, apiv1.EventList{NextCursor: "2", Events: []apiv1.Event{
				eventAt("2", "PreemptionNotified", "gpu-preemptible-dp-2", "capacity needed\nelsewhere", t0.Add(-8*time.Second), &deadline)}})
		default:
			writeJSON(w, 200, apiv1.EventList{NextCursor: "2", Events: []apiv1.Event{}})
		}
	})
	r := f.run("events", "--cluster", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "" +
		"TIME                 REASON              NODE                      MESSAGE [DEADLINE]\n" +
		"2025-03-04 09:00:00  NodeAdded           gpu-preemptible-dp-2      node added\n" +
		"2025-03-04 09:59:52  PreemptionNotified  gpu-preemptible-dp-2      capacity needed elsewhere [deadline 2025-03-04T10:04:12Z (in 4m12s)]\n"
	if r.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}

	r = f.run("events", "--cluster", "c1", "-o", "json", "--limit", "1")
	var list apiv1.EventList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Events) != 1 || list.Events[0].Reason != "NodeAdded" {
		t.Errorf("-o json --limit 1: %v\n%s", err, r.stdout)
	}
	reqs := f.only("GET", "/v1/clusters/c1/events")
	if q := reqs[len(reqs)-1].Query; q != "limit=1" {
		t.Errorf("--limit 1 query = %q", q)
	}
	if r = f.run("events"); r.err == nil || !strings.Contains(r.err.Error(), `"cluster"`) {
		t.Errorf("events without --cluster: %v", r.err)
	}
}

func TestEventsFollow(t *testing.T) {
	for _, output := range []string{"table", "json"} {
		t.Run(output, func(t *testing.T) {
			f := newFakeAPI(t)
			watchQuery := make(chan string, 1)
			f.mux.HandleFunc("GET /v1/clusters/c1/events", func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if q.Get("watch") != "true" {
					if q.Get("cursor") == "" {
						writeJSON(w, 200, apiv1.EventList{NextCursor: "7", Events: []apiv1.Event{
							eventAt("7", "NodeAdded", "gpu-preemptible-dp-1", "listed", t0, nil)}})
					} else {
						writeJSON(w, 200, apiv1.EventList{NextCursor: "7", Events: []apiv1.Event{}})
					}
					return
				}
				watchQuery <- r.URL.RawQuery
				w.Header().Set("Content-Type", "text/event-stream")
				for i, reason := range []string{"PreemptionNotified", "NodeRemoved"} {
					b, _ := json.Marshal(eventAt(fmt.Sprint(8+i), reason, "gpu-preemptible-dp-1", "streamed", t0.Add(time.Minute), nil))
					fmt.Fprintf(w, ": keepalive\n\nid: %d\nevent: node_lifecycle_event\ndata: %s\n\n", 8+i, b)
				}
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})

			out := f.follow(t, "NodeRemoved", "events", "--cluster", "c1", "--follow", "-o", output)
			if q := <-watchQuery; q != "cursor=7&watch=true" {
				t.Errorf("watch query = %q, want to resume from the listed cursor", q)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			switch output {
			case "table":
				if len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME") ||
					!strings.Contains(lines[1], "NodeAdded") || !strings.Contains(lines[2], "PreemptionNotified") || !strings.Contains(lines[3], "NodeRemoved") {
					t.Errorf("table:\n%s", out)
				}
			case "json":
				var reasons []string
				for _, l := range lines {
					var e apiv1.Event
					if err := json.Unmarshal([]byte(l), &e); err != nil {
						t.Fatalf("line %q is not one JSON event: %v", l, err)
					}
					reasons = append(reasons, e.Reason)
				}
				if strings.Join(reasons, ",") != "NodeAdded,PreemptionNotified,NodeRemoved" {
					t.Errorf("events = %v", reasons)
				}
			}
		})
	}
}

func TestEventsFollowServerCloses(t *testing.T) {
	f := newFakeAPI(t)
	f.mux.HandleFunc("GET /v1/clusters/c1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "text/event-stream")
			return
		}
		writeJSON(w, 200, apiv1.EventList{Events: []apiv1.Event{}})
	})
	r := f.run("events", "--cluster", "c1", "-f")
	if r.err == nil || !strings.Contains(r.err.Error(), "closed by server") {
		t.Errorf("err = %v", r.err)
	}
}

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := client.WriteConfig(cfgPath, client.Config{URL: "http://file", Token: "file-tok"}); err != nil {
		t.Fatal(err)
	}
	altPath := filepath.Join(dir, "alt.yaml")
	if err := client.WriteConfig(altPath, client.Config{URL: "http://alt"}); err != nil {
		t.Fatal(err)
	}
	noFile := filepath.Join(dir, "none.yaml")
	cases := []struct {
		name      string
		vars      map[string]string
		args      []string
		url, tok  string
		wantError string
	}{
		{"default", map[string]string{"SPARECAP_CONFIG": noFile}, nil, DefaultURL, "", ""},
		{"file", map[string]string{"SPARECAP_CONFIG": cfgPath}, nil, "http://file", "file-tok", ""},
		{"env over file", map[string]string{"SPARECAP_CONFIG": cfgPath, "SPARECAP_URL": "http://env", "SPARECAP_TOKEN": "env-tok"}, nil, "http://env", "env-tok", ""},
		{"env url, file token", map[string]string{"SPARECAP_CONFIG": cfgPath, "SPARECAP_URL": "http://env"}, nil, "http://env", "file-tok", ""},
		{"flag over env", map[string]string{"SPARECAP_CONFIG": cfgPath, "SPARECAP_URL": "http://env", "SPARECAP_TOKEN": "env-tok"},
			[]string{"--url", "http://flag", "--token", "flag-tok"}, "http://flag", "flag-tok", ""},
		{"flag over file", map[string]string{"SPARECAP_CONFIG": cfgPath}, []string{"--token", "flag-tok"}, "http://file", "flag-tok", ""},
		{"--config over $SPARECAP_CONFIG", map[string]string{"SPARECAP_CONFIG": cfgPath}, []string{"--config", altPath}, "http://alt", "", ""},
		{"XDG config home", map[string]string{"XDG_CONFIG_HOME": dir + "/xdg", "HOME": dir}, nil, DefaultURL, "", ""},
		{"missing --config", nil, []string{"--config", noFile}, "", "", "does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, s := newRootState(testEnv(tc.vars))
			if err := root.PersistentFlags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			url, tok, err := s.settings(root)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Errorf("err = %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil || url != tc.url || tok != tc.tok {
				t.Errorf("settings = %q, %q, %v; want %q, %q", url, tok, err, tc.url, tc.tok)
			}
		})
	}

	// End to end: the file's URL and token reach the server.
	f := newFakeAPI(t)
	f.handle("GET /v1/capacity", 200, apiv1.CapacityList{})
	if err := client.WriteConfig(cfgPath, client.Config{URL: f.srv.URL, Token: "file-tok"}); err != nil {
		t.Fatal(err)
	}
	r := runCLI(context.Background(), testEnv(nil), "--config", cfgPath, "capacity")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].Auth != "Bearer file-tok" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestBrokenConfigIgnoredWhenFlagsSuffice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("url: [\n"), 0o600)
	root, s := newRootState(testEnv(map[string]string{"SPARECAP_CONFIG": path}))
	root.PersistentFlags().Parse([]string{"--url", "http://x", "--token", "t"})
	if _, _, err := s.settings(root); err != nil {
		t.Errorf("flags given, yet the broken config file failed: %v", err)
	}
	root, s = newRootState(testEnv(map[string]string{"SPARECAP_CONFIG": path}))
	if _, _, err := s.settings(root); err == nil {
		t.Error("broken config file not reported")
	}
}

func TestHelpHasExamples(t *testing.T) {
	root := NewRoot()
	var missing []string
	for _, c := range allCommands(root) {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			missing = append(missing, c.CommandPath())
		}
	}
	if len(missing) > 0 {
		t.Errorf("commands without Short, Long or Example: %v", missing)
	}
}

func TestExtraCommands(t *testing.T) {
	ran := false
	extra := &cobraCommand{Use: "server", RunE: func(*cobraCommand, []string) error { ran = true; return nil }}
	root := NewRoot(extra)
	root.SetArgs([]string{"server"})
	if err := root.Execute(); err != nil || !ran {
		t.Errorf("extra command: ran %v, err %v", ran, err)
	}
}

func TestUnreachableServerHint(t *testing.T) {
	f := newFakeAPI(t)
	url := f.srv.URL
	f.srv.Close()
	r := runCLI(context.Background(), testEnv(map[string]string{"SPARECAP_CONFIG": t.TempDir() + "/x"}), "--url", url, "capacity")
	if r.err == nil || !strings.Contains(r.err.Error(), "is the sparecap server running at "+url) {
		t.Errorf("err = %v", r.err)
	}
}

// TestOutputEscapesControlCharacters: names and messages from the server
// reach the terminal with their control and bidirectional characters
// escaped, in tables, event lines and error messages.
func TestOutputEscapesControlCharacters(t *testing.T) {
	const evil = "x\x1b]0;pwned\x07\x1b[2J\u202eexe\r\n\ty"
	f := newFakeAPI(t)
	c := cluster("Ready", 8, apiv1.Node{NodeID: "n1", NodeName: "n-" + evil, ComputeClass: "preemptible", Status: "ready", NumGPUs: 8})
	c.ClusterName, c.Region = "name-"+evil, "region-"+evil
	f.handle("GET /v1/clusters", 200, apiv1.ClusterList{Clusters: []apiv1.Cluster{c}})
	f.handle("GET /v1/clusters/c1", 200, c)
	f.handle("GET /v1/clusters/c1/events", 200, apiv1.EventList{NextCursor: "1", Events: []apiv1.Event{
		eventAt("1", "Reason"+evil, "node-"+evil, "message "+evil, t0, nil)}})
	f.handle("DELETE /v1/clusters/c2", 404, apiv1.Error{Error: apiv1.ErrorBody{Code: "not_found", Message: "cluster " + evil + " not found"}})
	for _, args := range [][]string{{"clusters", "list"}, {"clusters", "get", "c1"}, {"events", "--cluster", "c1", "--limit", "1"}, {"clusters", "delete", "c2"}} {
		r := f.run(args...)
		out := r.stdout + r.stderr
		if r.err != nil {
			out += r.err.Error()
		}
		if strings.ContainsAny(out, "\x1b\x07\r\u202e") {
			t.Errorf("%v printed a raw control character:\n%q", args, out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("%v does not show the escaped text:\n%q", args, out)
		}
	}
}

// TestClusterGetShowsTheStrategyAndCap: a cluster over several types with
// a strategy and a price cap shows them; one with the defaults does not.
func TestClusterGetShowsTheStrategyAndCap(t *testing.T) {
	c := cluster("Ready", 16)
	c.PreemptibleGPUTypes, c.PreemptibleStrategy, c.MaxPreemptiblePerGPUHour = []string{"H100", "H200"}, "lowest-price", "1.60"
	c.AllocatedPreemptibleByType = map[string]int{"H200": 8, "H100": 8}
	f := newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, c)
	r := f.run("clusters", "get", "c1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"Preemptible types:", "H100, H200 (in order of preference)", "Preemptible strategy:", "lowest-price", "Preemptible cap:", "$1.60 per GPU-hour", "Allocated by type:", "H100 8, H200 8"} {
		mustContain(t, "table", r.stdout, want)
	}
	plain := cluster("Ready", 16)
	plain.PreemptibleStrategy = "in-order"
	f = newFakeAPI(t)
	f.handle("GET /v1/clusters/c1", 200, plain)
	r = f.run("clusters", "get", "c1")
	if strings.Contains(r.stdout, "strategy") || strings.Contains(r.stdout, "cap:") || strings.Contains(r.stdout, "by type") {
		t.Errorf("defaults shown:\n%s", r.stdout)
	}
}
