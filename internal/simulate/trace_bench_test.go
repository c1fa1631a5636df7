package simulate

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var alibaba2023Dir = flag.String("alibaba2023", "", "directory holding Alibaba's cluster-trace-gpu-v2023 CSVs (openb_pod_list_default.csv, openb_node_list_gpu_node.csv) for BenchmarkAlibaba2023; empty: a synthetic trace of the same shape")

// BenchmarkAlibaba2023 replays Alibaba's 2023 GPU trace (its default pod
// list, on its own node list: 150 days) as `sparecap simulate` does, from
// reading the CSVs to the result. Without -alibaba2023 the trace is a
// synthetic one of the same shape (its 6,203 scheduled pods with GPUs,
// any GPU type, 8.6 hours each on average, on 1,213 nodes of the same 7
// models); sparecap does not ship Alibaba's files. docs/planning.md
// reports the real one's figures.
func BenchmarkAlibaba2023(b *testing.B) {
	pods, nodes := syntheticAlibaba2023()
	if *alibaba2023Dir != "" {
		var err error
		if pods, err = os.ReadFile(filepath.Join(*alibaba2023Dir, "openb_pod_list_default.csv")); err != nil {
			b.Fatal(err)
		}
		if nodes, err = os.ReadFile(filepath.Join(*alibaba2023Dir, "openb_node_list_gpu_node.csv")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var r *Result
	var trace TraceAsk
	for b.Loop() {
		fl, err := ReadAlibabaNodes(FormatAlibaba2023, bytes.NewReader(nodes))
		if err != nil {
			b.Fatal(err)
		}
		evs, ask, err := ReadTraceAs(FormatAlibaba2023, bytes.NewReader(pods), fl)
		if err != nil {
			b.Fatal(err)
		}
		s := Scenario{Seed: 1, Horizon: Duration{3600 * time.Hour}, Fleet: fl, Policy: Policy{Name: "replay"}}
		if err := s.Check(); err != nil {
			b.Fatal(err)
		}
		if r, err = Run(context.Background(), s, evs, s.Policy, nil); err != nil {
			b.Fatal(err)
		}
		trace = *ask
	}
	op := r.Operator
	if op.Refused > 0 || len(r.Warnings) > 0 {
		b.Errorf("on-demand refused %d, warnings %q", op.Refused, r.Warnings)
	}
	b.ReportMetric(trace.StandardGPUh, "std-rows-GPUh")
	b.ReportMetric(trace.PreemptibleGPUh, "pre-rows-GPUh")
	b.ReportMetric(op.AskedStandardGPUh, "std-asked-GPUh")
	b.ReportMetric(op.StandardGPUh, "std-GPUh")
	b.ReportMetric(op.AskedPreemptibleGPUh, "pre-asked-GPUh")
	b.ReportMetric(op.PreemptibleGPUh, "pre-GPUh")
}

// syntheticAlibaba2023 is a pod list and a node list in the layout of
// Alibaba's 2023 trace, of its default list's size and shape.
func syntheticAlibaba2023() (pods, nodes []byte) {
	rng := rand.New(rand.NewPCG(2023, 1))
	var nb bytes.Buffer
	nb.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	n := 0
	for _, m := range []struct {
		model string
		gpus  int
	}{{"P100", 265}, {"G3", 312}, {"V100M32", 204}, {"V100M16", 195}, {"G2", 4392}, {"T4", 842}, {"A10", 2}} {
		for left := m.gpus; left > 0; left -= 8 {
			fmt.Fprintf(&nb, "openb-node-%04d,96000,786432,%d,%s\n", n, min(left, 8), m.model)
			n++
		}
	}
	var pb bytes.Buffer
	pb.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	span := 149 * 24 * 3600.0
	for i := range 6203 {
		at := rng.Float64() * span
		end := at + rng.ExpFloat64()*8.6*3600
		qos := "LS"
		if rng.IntN(100) < 43 {
			qos = "BE"
		}
		gpus := 1
		if rng.IntN(100) < 2 {
			gpus = 8
		}
		fmt.Fprintf(&pb, "openb-pod-%04d,6000,12288,%d,1000,,%s,Running,%.0f,%.0f,%.0f\n", i, gpus, qos, at, min(end, span), at)
	}
	return pb.Bytes(), nb.Bytes()
}
