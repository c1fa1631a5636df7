package simulate

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
)

// goodTrace is the trace of docs/planning.md.
var goodTrace = func() string {
	s, err := docs.Snippet("planning.md", "trace")
	if err != nil {
		panic(err)
	}
	return s
}()

func TestReadTrace(t *testing.T) {
	evs, err := ReadTrace(strings.NewReader(goodTrace))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{At: 0, Cluster: "train", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Preemptible, GPUs: 128},
		{At: 90 * time.Minute, Cluster: "burst", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard, GPUs: 192},
		{At: 3 * time.Hour, Cluster: "burst", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard},
		{At: 4 * time.Hour, Cluster: "train", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Preemptible, GPUs: 32},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(evs[i], want[i]) {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
}

func TestReadTraceRefuses(t *testing.T) {
	for _, c := range []struct{ trace, want string }{
		{"", "header"},
		{"at,cluster\n", "header"},
		{"at,cluster,region,gpu_type,class,gpus\n1h,a,r,G,standard,8\n0,b,r,G,standard,8\n", "line 3: at 0s comes before"},
		{"at,cluster,region,gpu_type,class,gpus\n-5,a,r,G,standard,8\n", "line 2: at \"-5\""},
		{"at,cluster,region,gpu_type,class,gpus\nsoon,a,r,G,standard,8\n", "neither seconds nor a duration"},
		{"at,cluster,region,gpu_type,class,gpus\n0,a b,r,G,standard,8\n", "cluster \"a b\" is not a valid name"},
		{"at,cluster,region,gpu_type,class,gpus\n0,a,r,G,spot,8\n", "class \"spot\""},
		{"at,cluster,region,gpu_type,class,gpus\n0,a,r,G,standard,7\n", "7 GPUs is not a multiple of 8"},
		{"at,cluster,region,gpu_type,class,gpus\n0,a,r,G,standard,x\n", "gpus \"x\" is not a whole number"},
		{"at,cluster,region,gpu_type,class,gpus\n0,a,r,G,standard,8\n1,a,r,G,preemptible,8\n", "cluster a was r G standard before"},
		{"at,cluster,region,gpu_type,class,gpus\n0,a,r,G,standard\n", "wrong number of fields"},
		{"at,cluster,region,gpu_type,class,gpus\n" + strings.Repeat("x", 5000), "longer than 1024 bytes"},
		{"at,cluster,region,gpu_type,class,gpus\n1e9,a,r,G,standard,8\n", "neither seconds nor a duration"},
	} {
		_, err := ReadTrace(strings.NewReader(c.trace))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("trace %.60q: %v; want an error with %q", c.trace, err, c.want)
		}
	}
}

// TestTraceRuns: a trace's demand runs like the generated one (the
// burst takes back the 8 nodes lent out of on-demand machines, not the 8
// on the reservation), and a standard request the fleet cannot hold is
// refused, not fatal.
func TestTraceRuns(t *testing.T) {
	s := scenario(t)
	s.Horizon.D = 6 * time.Hour
	evs, err := ReadTrace(strings.NewReader(goodTrace + "5h,huge,us-east-1,H100_SXM,standard,99992\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tenants) != 1 || r.Tenants[0].Cluster != "train" || r.Tenants[0].Reclaims != 8 || r.Operator.Refused != 1 {
		t.Errorf("tenants %+v, operator %+v", r.Tenants, r.Operator)
	}
}

// FuzzReadTrace: any input is read or refused with an error, never a
// panic, and what is read is valid demand.
func FuzzReadTrace(f *testing.F) {
	f.Add([]byte(goodTrace))
	f.Add([]byte("at,cluster,region,gpu_type,class,gpus\n1.5,a,r,G,standard,8\n"))
	f.Add([]byte("at,cluster,region,gpu_type,class,gpus\n\"0\",\"a\",r,G,preemptible,0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReadTrace(bytes.NewReader(data))
		if err != nil {
			return
		}
		var last time.Duration
		for _, e := range evs {
			if e.At < last || e.At > MaxHorizon || !domain.ValidName(e.Cluster) || e.GPUs%8 != 0 || e.GPUs < 0 ||
				(e.Class != domain.Standard && e.Class != domain.Preemptible) {
				t.Fatalf("read an invalid event %+v", e)
			}
			last = e.At
		}
	})
}

func TestGenerate(t *testing.T) {
	s := scenario(t)
	evs := Generate(s)
	if len(evs) == 0 || evs[0].Class != domain.Preemptible {
		t.Fatalf("events %v", evs[:min(len(evs), 3)])
	}
	standard := 0
	for i, e := range evs {
		if i > 0 && e.At < evs[i-1].At {
			t.Fatalf("event %d at %s before %s", i, e.At, evs[i-1].At)
		}
		if e.Class == domain.Standard && e.GPUs > 0 {
			standard++
			if e.Region == "eu-west-1" && e.GPUType == "H100_SXM" {
				t.Errorf("a cluster in a pool the fleet lacks: %+v", e)
			}
		}
	}
	// 0.5 an hour in each of two on-demand pools for a week: 168 expected.
	if standard < 120 || standard > 220 {
		t.Errorf("%d on-demand arrivals in a week, expected about 168", standard)
	}
}
