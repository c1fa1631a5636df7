package simulate

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
)

// Rows in the layout of Alibaba's cluster-trace-gpu-v2023 (openb_pod_list
// and openb_node_list): two latency-sensitive pods of 4 and 8 GPUs, a
// best-effort one of 2, one without GPUs and one never scheduled.
const (
	alibabaPods = `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0001,12000,65536,4,1000,V100M16,LS,Running,100,7300,101
openb-pod-0002,32000,131072,8,1000,V100M16,LS,Succeeded,3700,10900,3702
openb-pod-0003,8000,32768,2,1000,V100M16,BE,Running,200,,201
openb-pod-0004,4000,8192,0,0,,Burstable,Running,300,900,301
openb-pod-0005,4000,8192,1,1000,V100M16,LS,Pending,400,,
`
	alibabaNodes = `sn,cpu_milli,memory_mib,gpu,model
openb-node-0001,96000,786432,8,V100M16
openb-node-0002,96000,786432,8,V100M16
openb-node-0003,96000,786432,0,
`
	alibabaJobs = `job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,job_type
job-1,org-a,A100,16,1,4,0,3600,HP
job-2,org-b,A100,8,2,8,600,7200,Spot
job-3,org-a,A100,4,0.5,3,1200,600,Spot
`
)

func TestReadAlibaba2023(t *testing.T) {
	evs, _, err := ReadTraceAs(FormatAlibaba2023, strings.NewReader(alibabaPods), fleet.File{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(evs)
	std, pre := clusterName(domain.Standard, "V100M16"), clusterName(domain.Preemptible, "V100M16")
	want := fmt.Sprint([]Event{
		{At: 0, Cluster: std, Region: AlibabaRegion, GPUType: "V100M16", Class: domain.Standard, GPUs: 8},
		{At: 100 * time.Second, Cluster: pre, Region: AlibabaRegion, GPUType: "V100M16", Class: domain.Preemptible, GPUs: 8},
		{At: 3600 * time.Second, Cluster: std, Region: AlibabaRegion, GPUType: "V100M16", Class: domain.Standard, GPUs: 16},
		{At: 7200 * time.Second, Cluster: std, Region: AlibabaRegion, GPUType: "V100M16", Class: domain.Standard, GPUs: 8},
		{At: 10800 * time.Second, Cluster: std, Region: AlibabaRegion, GPUType: "V100M16", Class: domain.Standard, GPUs: 0},
	})
	if got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	f, err := ReadAlibabaNodes(FormatAlibaba2023, strings.NewReader(alibabaNodes))
	if err != nil || len(f.Pools) != 1 || f.Pools[0].Machines != 2 || f.Pools[0].GPUType != "V100M16" || f.Pools[0].Region != AlibabaRegion {
		t.Fatalf("fleet %+v %v", f, err)
	}
	// The trace runs on its own fleet.
	s := Scenario{Horizon: Duration{4 * time.Hour}, Fleet: f}
	s.Fleet.Prices = map[string]string{"V100M16": "2.48"}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tenants) != 1 || r.Tenants[0].Reclaims != 1 || r.Operator.StandardGPUh == 0 {
		t.Errorf("the 16-GPU hour reclaims the best-effort node: tenants %+v, operator %+v", r.Tenants, r.Operator)
	}
}

func TestReadAlibaba2026(t *testing.T) {
	evs, _, err := ReadTraceAs(FormatAlibaba2026, strings.NewReader(alibabaJobs), fleet.File{})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, e := range evs {
		sizes = append(sizes, fmt.Sprintf("%s %s=%d", e.At, e.Class, e.GPUs))
	}
	// HP 4 GPUs for an hour; Spot 16 from 10 minutes, 2 more (1.5 rounded
	// up) from 20 to 30 minutes: 24 in whole nodes, then 16, then 0.
	want := "[0s standard=8 10m0s preemptible=16 20m0s preemptible=24 30m0s preemptible=16 1h0m0s standard=0 2h10m0s preemptible=0]"
	if got := fmt.Sprint(sizes); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	f, err := ReadAlibabaNodes(FormatAlibaba2026, strings.NewReader("gpu_model,gpu_capacity_num,cpu_num,node_name\nA100,8,96,n1\nA100,4,48,n2\n"))
	if err != nil || f.Pools[0].Machines != 2 {
		t.Fatalf("fleet %+v %v", f, err)
	}
}

func TestReadAlibabaRefuses(t *testing.T) {
	for _, c := range []struct{ format, in, want string }{
		{"bogus", "", "unknown trace format"},
		{FormatAlibaba2023, "name,num_gpu\n", `lacks "cpu_milli"`},
		{FormatAlibaba2023, strings.Replace(alibabaPods, ",LS,Running,100", ",XX,Running,100", 1), `line 2: qos "XX"`},
		{FormatAlibaba2023, strings.Replace(alibabaPods, ",4,1000,V100M16,LS,Running,100,", ",four,1000,V100M16,LS,Running,100,", 1), `num_gpu "four"`},
		{FormatAlibaba2023, strings.Replace(alibabaPods, "LS,Running,100,7300", "LS,Running,soon,7300", 1), `creation_time "soon"`},
		{FormatAlibaba2026, strings.Replace(alibabaJobs, ",HP\n", ",VIP\n", 1), `job_type "VIP"`},
		{FormatAlibaba2026, strings.Replace(alibabaJobs, "A100,16,1,4", "A100,16,-1,4", 1), `gpu_request "-1"`},
	} {
		if _, _, err := ReadTraceAs(c.format, strings.NewReader(c.in), fleet.File{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %.50q: %v; want %q", c.format, c.in, err, c.want)
		}
	}
	if _, err := ReadAlibabaNodes(FormatAlibaba2023, strings.NewReader("sn,gpu\nn1,8\n")); err == nil {
		t.Error("a node list without models was read")
	}
	if _, err := ReadAlibabaNodes(FormatSparecap, strings.NewReader(alibabaNodes)); err == nil {
		t.Error("a node list in sparecap's format was read")
	}
}

// FuzzReadAlibaba: any input is read or refused, never a panic, and what
// is read is valid demand.
func FuzzReadAlibaba(f *testing.F) {
	f.Add(0, []byte(alibabaPods))
	f.Add(1, []byte(alibabaJobs))
	f.Add(2, []byte(alibabaNodes))
	f.Fuzz(func(t *testing.T, which int, data []byte) {
		switch which % 3 {
		case 0, 1:
			format := []string{FormatAlibaba2023, FormatAlibaba2026}[(which%3+3)%3%2]
			evs, _, err := ReadTraceAs(format, bytes.NewReader(data), fleet.File{})
			if err != nil {
				return
			}
			var last time.Duration
			for _, e := range evs {
				if e.At < last || !domain.ValidName(e.Cluster) || !domain.ValidName(e.GPUType) || e.GPUs%8 != 0 || e.GPUs < 0 || e.GPUs > 100_000 {
					t.Fatalf("read an invalid event %+v", e)
				}
				last = e.At
			}
		default:
			fl, err := ReadAlibabaNodes(FormatAlibaba2023, bytes.NewReader(data))
			if err != nil {
				return
			}
			s := Scenario{Horizon: Duration{time.Hour}, Fleet: fl}
			if err := s.Check(); err != nil {
				t.Fatalf("a node list read into a fleet the scenario refuses: %v", err)
			}
		}
	})
}

// A trace that says "any of these": the 2023 trace leaves gpu_spec empty
// (any GPU will do) or names alternatives ("A|B"). Each pod goes, at its
// arrival, to the first type with room in the documented order (the
// cheapest on demand first), and the replay places them all.
func TestATraceThatSaysAnyOfThese(t *testing.T) {
	pods := `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,1024,12,1000,,LS,Running,0,7200,0
p2,1000,1024,8,1000,,LS,Running,600,7200,600
p3,1000,1024,8,1000,,BE,Running,1200,7200,1200
p4,1000,1024,4,1000,B|Z80,Guaranteed,Running,1800,5400,1800
p5,1000,1024,8,1000,Z80,LS,Running,2400,3000,2400
`
	nodes := "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,8,B\nn2,1,1,8,B\nn3,1,1,8,A\nn4,1,1,8,A\nn5,1,1,8,B\n"
	fl, err := ReadAlibabaNodes(FormatAlibaba2023, strings.NewReader(nodes))
	if err != nil {
		t.Fatal(err)
	}
	fl.Prices = map[string]string{"A": "1.00", "B": "2.00"}
	evs, ask, err := ReadTraceAs(FormatAlibaba2023, strings.NewReader(pods), fl)
	if err != nil {
		t.Fatal(err)
	}
	// The rows as they are: 12×2h + 8×110m + 4×1h + 8×10m standard,
	// 8×100m preemptible.
	if *ask != (TraceAsk{Rows: 5, StandardGPUh: 44, PreemptibleGPUh: 13.333}) {
		t.Errorf("the trace asks %+v", *ask)
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %s %s=%d", e.At, e.GPUType, e.Class, e.GPUs))
	}
	// p1 fits A (cheapest, 16 GPUs); p2 does not (24 in whole nodes):
	// B; p3, preemptible, finds A full of standard nodes: B, beside p2;
	// p4 names B or a type no pool has: B; p5 a type no pool has.
	want := "[0s A standard=16 10m0s B standard=8 20m0s B preemptible=8 30m0s B standard=16 40m0s Z80 standard=8 50m0s Z80 standard=0 1h30m0s B standard=8 2h0m0s A standard=0 2h0m0s B standard=0 2h0m0s B preemptible=0]"
	if fmt.Sprint(got) != want {
		t.Errorf("events\n%v\nwant\n%s", got, want)
	}
	s := Scenario{Horizon: Duration{3 * time.Hour}, Fleet: fl, Policy: Policy{Name: "replay"}}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	op := r.Operator
	// Only p5, which names a type no pool has, is refused.
	if op.Refused != 1 || op.AskedStandardGPUh != hours(16*7200+8*6600+8*3600+8*600) || op.AskedPreemptibleGPUh != hours(8*6000) {
		t.Errorf("operator %+v", op)
	}
	if op.StandardGPUh < op.AskedStandardGPUh-hours(8*600)-1 || op.PreemptibleGPUh < op.AskedPreemptibleGPUh-0.5 {
		t.Errorf("delivered %v standard and %v preemptible GPU-hours of %v and %v asked", op.StandardGPUh, op.PreemptibleGPUh, op.AskedStandardGPUh, op.AskedPreemptibleGPUh)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %q", r.Warnings)
	}
}

// A replay whose demand was mostly refused says so: here the trace runs
// on a fleet whose one pool is of another type than every pod asks.
func TestAReplayMostlyRefusedSaysSo(t *testing.T) {
	fl, err := ReadAlibabaNodes(FormatAlibaba2023, strings.NewReader("sn,gpu,model\nn1,8,A100\n"))
	if err != nil {
		t.Fatal(err)
	}
	fl.Prices = map[string]string{"A100": "2.00"}
	evs, ask, err := ReadTraceAs(FormatAlibaba2023, strings.NewReader(alibabaPods), fl)
	if err != nil {
		t.Fatal(err)
	}
	s := Scenario{Horizon: Duration{2 * time.Hour}, Fleet: fl, Policy: Policy{Name: "replay"}, Trace: ask}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	c, err := Compare(context.Background(), s, evs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := strings.Join(c.Runs[0].Warnings, "\n")
	for _, want := range []string{"most of the standard demand was refused", "no pool has the GPU type V100M16", "the demand runs to T+3h0m0s, past the horizon of 2h0m0s"} {
		if !strings.Contains(ws, want) {
			t.Errorf("warnings %q lack %q", ws, want)
		}
	}
	var b bytes.Buffer
	if err := c.WriteTable(&b); err != nil || !strings.Contains(b.String(), "WARNING (replay): most of the standard demand was refused") ||
		!strings.Contains(b.String(), "The trace's 3 rows with GPUs ask 24 standard and 5.944 preemptible GPU-hours as they are") {
		t.Errorf("the table does not warn: %v\n%s", err, b.String())
	}
}
