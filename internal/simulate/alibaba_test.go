package simulate

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
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
	evs, err := ReadTraceAs(FormatAlibaba2023, strings.NewReader(alibabaPods))
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
	evs, err := ReadTraceAs(FormatAlibaba2026, strings.NewReader(alibabaJobs))
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
		if _, err := ReadTraceAs(c.format, strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
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
			evs, err := ReadTraceAs(format, bytes.NewReader(data))
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
