package scalebench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestPercentile(t *testing.T) {
	ds := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ds(7), 50, 7 * time.Millisecond},
		{ds(7), 99, 7 * time.Millisecond},
		{ds(4, 1, 3, 2), 50, 2 * time.Millisecond}, // lower middle for even N
		{ds(4, 1, 3, 2), 75, 3 * time.Millisecond},
		{ds(4, 1, 3, 2), 100, 4 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 10, 1 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 11, 2 * time.Millisecond},
	} {
		if got := Percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %g) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
	var l Latencies
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	l.Err()
	s := l.Summary()
	if s.N != 100 || s.Errors != 1 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("Summary = %+v", s)
	}
	if s.Mean != 50500*time.Microsecond {
		t.Errorf("Mean = %v, want 50.5ms", s.Mean)
	}
}

// fleetFile mirrors the documented fleet file (docs/operations.md), with
// unknown keys refused as the server refuses them.
type fleetFile struct {
	Pools []struct {
		Region      string `json:"region"`
		GPUType     string `json:"gpu_type"`
		Machines    int    `json:"machines"`
		ReservedFor string `json:"reserved_for,omitempty"`
	} `json:"pools"`
	Prices map[string]string `json:"prices"`
}

func TestPlanDefaultShape(t *testing.T) {
	p, err := NewPlan(Shape{GPUs: 96000, Clusters: 1000, ClustersPerProject: 50, ReservationHolders: 4, Reserved: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Machines != 12000 {
		t.Errorf("machines = %d, want 12000", p.Machines)
	}
	var f fleetFile
	if err := yaml.UnmarshalStrict(p.FleetYAML(), &f); err != nil {
		t.Fatalf("fleet YAML: %v\n%s", err, p.FleetYAML())
	}
	if len(f.Pools) != 32 {
		t.Fatalf("pools = %d, want 32 (16 partitions × on-demand + reservation)", len(f.Pools))
	}
	total, reserved := 0, 0
	perPartition := map[string]int{}
	holders := map[string]bool{}
	for _, pool := range f.Pools {
		total += pool.Machines
		perPartition[pool.Region+"/"+pool.GPUType] += pool.Machines
		if pool.ReservedFor != "" {
			reserved += pool.Machines
			holders[pool.ReservedFor] = true
			if pool.Machines != 150 {
				t.Errorf("reservation %s/%s has %d machines, want 150", pool.Region, pool.GPUType, pool.Machines)
			}
		}
	}
	if total != 12000 || reserved != 2400 {
		t.Errorf("machines %d (reserved %d), want 12000 (2400)", total, reserved)
	}
	for part, n := range perPartition {
		if n != 750 {
			t.Errorf("partition %s has %d machines, want 750", part, n)
		}
	}
	if len(holders) != 4 {
		t.Errorf("reservation holders %v, want 4", holders)
	}
	if len(f.Prices) != 4 {
		t.Errorf("prices %v, want the 4 GPU types", f.Prices)
	}

	if len(p.Projects) != 20 || len(p.Clusters) != 1000 {
		t.Fatalf("%d projects, %d clusters; want 20, 1000", len(p.Projects), len(p.Clusters))
	}
	if n := p.ClustersOf(p.ListProject); n != 50 {
		t.Errorf("list project %s has %d clusters, want 50", p.ListProject, n)
	}
	if p.PreemptibleRange != [2]int{3, 6} {
		t.Errorf("preemptible range %v, want 3-6 nodes (24-48 GPUs)", p.PreemptibleRange)
	}
	nodes := p.StdNodes + p.PreemptibleNodes
	if nodes < 5700 || nodes > 6300 {
		t.Errorf("clusters ask for %d nodes, want about 6000 (half the fleet)", nodes)
	}
	perPart := map[Partition]int{}
	names := map[string]bool{}
	reservedClusters := 0
	for _, c := range p.Clusters {
		perPart[c.Partition]++
		if names[c.Project+"/"+c.Name] {
			t.Errorf("duplicate cluster %s/%s", c.Project, c.Name)
		}
		names[c.Project+"/"+c.Name] = true
		if c.NumGPUs < 8 || c.NumGPUs > 16 || c.NumPreemptibleGPUs < 24 || c.NumPreemptibleGPUs > 48 || c.NumGPUs%8 != 0 || c.NumPreemptibleGPUs%8 != 0 {
			t.Errorf("cluster %s: %d standard, %d preemptible GPUs", c.Name, c.NumGPUs, c.NumPreemptibleGPUs)
		}
		if c.Billing == "RESERVED" {
			reservedClusters++
			if p.Holder[c.Partition] != c.Project {
				t.Errorf("cluster %s is RESERVED in %s, whose reservation %s holds", c.Name, c.Partition, p.Holder[c.Partition])
			}
		}
	}
	for part, n := range perPart {
		if n < 62 || n > 63 {
			t.Errorf("partition %s has %d clusters, want 62-63", part, n)
		}
	}
	if reservedClusters == 0 || reservedClusters > 100 {
		t.Errorf("%d RESERVED clusters, want a few", reservedClusters)
	}
	// Standard demand fits in each partition's on-demand pool.
	std := map[Partition]int{}
	for _, c := range p.Clusters {
		if c.Billing == "ON_DEMAND" {
			std[c.Partition] += c.NumGPUs / 8
		}
	}
	for part, n := range std {
		if n > 600 {
			t.Errorf("partition %s: %d standard nodes do not fit 600 on-demand machines", part, n)
		}
	}

	again, _ := NewPlan(p.Shape)
	if string(again.FleetYAML()) != string(p.FleetYAML()) || again.StdNodes != p.StdNodes || again.PreemptibleNodes != p.PreemptibleNodes {
		t.Error("the plan is not deterministic")
	}
}

func TestPlanSmallAndInvalid(t *testing.T) {
	p, err := NewPlan(Shape{GPUs: 9600, Clusters: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Machines != 1200 || len(p.Projects) != 2 || p.ClustersOf(p.ListProject) != 50 {
		t.Errorf("machines %d, projects %d, list project %d clusters", p.Machines, len(p.Projects), p.ClustersOf(p.ListProject))
	}
	if n := p.StdNodes + p.PreemptibleNodes; n < 500 || n > 700 {
		t.Errorf("%d nodes asked, want about 600", n)
	}
	// Uneven machine counts: the remainder goes to the first partitions.
	p, err = NewPlan(Shape{GPUs: 8 * 35, Clusters: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, pool := range p.Pools {
		total += pool.Machines
		if pool.Machines < 1 {
			t.Errorf("pool %+v has no machine", pool)
		}
	}
	if total != 35 {
		t.Errorf("%d machines, want 35", total)
	}
	for _, s := range []Shape{{GPUs: 9601, Clusters: 1}, {GPUs: 8, Clusters: 1}, {GPUs: 9600, Clusters: 0}} {
		if _, err := NewPlan(s); err == nil {
			t.Errorf("NewPlan(%+v) accepted", s)
		}
	}
}

func TestPlanBurst(t *testing.T) {
	a, b, c := Partition{"r1", "g1"}, Partition{"r1", "g2"}, Partition{"r2", "g1"}
	states := []PartitionState{
		{Partition: a, ODFree: 10, ODPreemptible: 5},
		{Partition: b, ODFree: 7, ODPreemptible: 9},
		{Partition: c, ODFree: 3, ODPreemptible: 9},
	}
	got := PlanBurst(states, 20)
	want := []BurstPart{{b, 7, 9}, {c, 3, 9}, {a, 10, 2}}
	if len(got) != len(want) {
		t.Fatalf("PlanBurst = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("part %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := PlanBurst(states, 4); len(got) != 1 || got[0] != (BurstPart{b, 7, 4}) {
		t.Errorf("PlanBurst(4) = %+v", got)
	}
	// Not enough lent machines: everything there is.
	got = PlanBurst(states, 100)
	sum := 0
	for _, p := range got {
		sum += p.Reclaim
	}
	if sum != 23 {
		t.Errorf("PlanBurst(100) reclaims %d, want all 23", sum)
	}
}

const sampleMetrics = `# HELP sparecap_nodes Nodes.
# TYPE sparecap_nodes gauge
sparecap_nodes{class="preemptible",state="ready"} 4500
sparecap_nodes{class="preemptible",state="provisioning"} 3
sparecap_nodes{class="standard",state="ready"} 1500
sparecap_nodes{class="standard",state="pending"} 0
sparecap_store_up 1
sparecap_targets_unfulfilled{reason="NoSpareCapacity"} 2
sparecap_targets_unfulfilled{reason="Provisioning"} 1
sparecap_cluster_desired_preemptible_gpus{cluster_id="c-1",project_id="p"} 48
sparecap_cluster_allocated_preemptible_gpus{cluster_id="c-1",project_id="p"} 40
sparecap_reclaims_started_total{cause="preempted"} 12
sparecap_reclaims_started_total{cause="fair_share"} 3
sparecap_notice_fanout_seconds_bucket{le="0.5"} 2
sparecap_notice_fanout_seconds_bucket{le="1"} 5
sparecap_notice_fanout_seconds_bucket{le="60"} 10
sparecap_notice_fanout_seconds_bucket{le="+Inf"} 10
sparecap_notice_fanout_seconds_sum 123.5
sparecap_notice_fanout_seconds_count 10
weird_metric{msg="a \"quoted\", {braced} \\ value\n",x="y"} 1.5e3 1712345678000
go_gc_duration_seconds{quantile="0.5"} NaN
`

func TestParseMetrics(t *testing.T) {
	sc, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if v := sc.Value("weird_metric", map[string]string{"x": "y"}); v != 1500 {
		t.Errorf("weird_metric = %v", v)
	}
	for _, s := range sc {
		if s.Name == "weird_metric" && s.Labels["msg"] != "a \"quoted\", {braced} \\ value\n" {
			t.Errorf("escaped label = %q", s.Labels["msg"])
		}
	}
	st := StatusOf(sc)
	if !st.StoreUp || st.Ready("standard") != 1500 || st.Ready("preemptible") != 4500 || st.Busy() != 3 {
		t.Errorf("status = %+v", st)
	}
	if st.DesiredPreemptibleGPUs != 48 || st.AllocatedPreemptibleGPUs != 40 || st.Clusters != 1 {
		t.Errorf("targets = %+v", st)
	}
	if st.Settled(1500) {
		t.Error("settled with a node provisioning and a target Provisioning")
	}
	if !strings.Contains(st.String(), "provisioning=3") {
		t.Errorf("String() = %s", st)
	}
	rc := Reclaims(sc)
	if rc["preempted"] != 12 || sumCauses(rc) != 15 {
		t.Errorf("reclaims = %v", rc)
	}
	h := sc.Histogram("sparecap_notice_fanout_seconds")
	if h.Count != 10 || h.Sum != 123.5 || len(h.Buckets) != 4 || !math.IsInf(h.Buckets[3].Le, 1) {
		t.Fatalf("histogram = %+v", h)
	}
	if q := h.Quantile(0.5); q != 1 {
		t.Errorf("p50 bucket = %v, want 1", q)
	}
	if q := h.Quantile(1); q != 60 {
		t.Errorf("max bucket = %v, want 60", q)
	}
	before := Histogram{Buckets: []Bucket{{0.5, 2}, {1, 2}, {60, 2}, {math.Inf(1), 2}}, Count: 2, Sum: 0.5}
	d := h.Sub(before)
	if d.Count != 8 || d.Quantile(0.25) != 1 || d.Quantile(1) != 60 || d.Mean() != 123.0/8 {
		t.Errorf("delta = %+v (p25 %v, max %v, mean %v)", d, d.Quantile(0.25), d.Quantile(1), d.Mean())
	}
	if (Histogram{}).Quantile(0.5) != 0 {
		t.Error("empty histogram quantile")
	}

	settled, _ := ParseMetrics(strings.NewReader("sparecap_store_up 1\nsparecap_nodes{class=\"standard\",state=\"ready\"} 2\nsparecap_targets_unfulfilled{reason=\"NoSpareCapacity\"} 4\n"))
	if !StatusOf(settled).Settled(2) || StatusOf(settled).Settled(3) {
		t.Error("Settled wrong on a resting fleet")
	}
	for _, bad := range []string{"name{a=\"b\" 1", "name{a=b} 1", "name", "name{a=\"b\"} x"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) accepted", bad)
		}
	}
}

func TestProcParsers(t *testing.T) {
	stat := "1234 (spare cap) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 1000 1000000 500 18446744073709551615"
	d, err := parseStatCPU(stat)
	if err != nil || d != 3250*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 3.25s", d, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Error("parseStatCPU accepted garbage")
	}
	status := "Name:\tsparecap\nVmPeak:\t  200 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	if v, err := parseStatusKB(status, "VmHWM"); err != nil || v != 123456*1024 {
		t.Errorf("VmHWM = %d, %v", v, err)
	}
	if _, err := parseStatusKB(status, "VmSwap"); err == nil {
		t.Error("missing field accepted")
	}
	// This process's own figures are readable.
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Errorf("ProcCPU(self): %v", err)
	}
	if _, err := ProcStatusKB(os.Getpid(), "VmHWM"); err != nil {
		t.Errorf("VmHWM(self): %v", err)
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a"), make([]byte, 100), 0o600)
	_ = os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
	_ = os.WriteFile(filepath.Join(dir, "sub", "b"), make([]byte, 50), 0o600)
	_ = os.WriteFile(filepath.Join(dir, LogName), make([]byte, 1000), 0o600)
	if n, err := DirSize(dir, LogName); err != nil || n != 150 {
		t.Errorf("DirSize = %d, %v; want 150", n, err)
	}
}

func TestReport(t *testing.T) {
	r := NewReport()
	r.Add("p", "a-ms", "a", 1.5, "ms")
	r.Add("p", "b", "b", math.Inf(1), "s")
	r.Add("p", "a-ms", "a again", 2, "ms")
	if v, _ := r.Get("a-ms"); v != 2 || len(r.All()) != 2 {
		t.Errorf("figures = %+v", r.All())
	}
	if v, _ := r.Get("b"); v != -1 {
		t.Errorf("infinite value stored as %v", v)
	}
	path := filepath.Join(t.TempDir(), "out.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	if !strings.Contains(b.String(), "a again") || !strings.Contains(b.String(), "note:") {
		t.Errorf("table:\n%s", b.String())
	}
}
