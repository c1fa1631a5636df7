package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func nodeOf(c apiv1.Cluster, class string) apiv1.Node {
	for _, n := range c.GPUWorkerNodes {
		if n.ComputeClass == class && n.Status == "ready" {
			return n
		}
	}
	return apiv1.Node{}
}

// onDemandNode is a ready preemptible node of c on a machine outside any
// reservation (one that may serve standard nodes).
func (e *env) onDemandNode(c apiv1.Cluster) apiv1.Node {
	e.t.Helper()
	for _, n := range c.GPUWorkerNodes {
		if n.ComputeClass != "preemptible" || n.Status != "ready" {
			continue
		}
		dn, err := e.st.GetNode(e.ctx, n.NodeID)
		if err != nil {
			e.t.Fatal(err)
		}
		if m, err := e.st.GetMachine(e.ctx, dn.MachineID); err == nil && m.ReservationID == "" {
			return n
		}
	}
	e.t.Fatalf("no preemptible node on an on-demand machine in %+v", c.GPUWorkerNodes)
	return apiv1.Node{}
}

// TestConvertNode: a tenant converts a preemptible node to standard with
// one call; the cluster's counts and the node's class follow, and usage
// bills the node at the preemptible price up to that second and at the
// on-demand price from it.
func TestConvertNode(t *testing.T) {
	e, c, start := usageWorld(t)
	// Preemptible nodes are lent from reservations first: a third one
	// comes from the on-demand pool, and may become standard.
	e.do("p", "PATCH", "/v1/clusters/"+c.ClusterID, `{"num_preemptible_gpus":24}`, 200, nil)
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	pre := e.onDemandNode(got)
	at := e.clk.Now().Truncate(time.Second)
	path := fmt.Sprintf("/v1/clusters/%s/nodes/%s/convert", c.ClusterID, pre.NodeName)
	e.do("p", "POST", path, `{"compute_class":"standard"}`, 200, &got)
	if got.NumGPUs != 16 || got.DesiredPreemptibleGPUs != 16 {
		t.Fatalf("counts after converting: %d standard, %d preemptible", got.NumGPUs, got.DesiredPreemptibleGPUs)
	}
	var conv apiv1.Node
	for _, n := range got.GPUWorkerNodes {
		if n.NodeID == pre.NodeID {
			conv = n
		}
	}
	if conv.ComputeClass != "standard" || conv.Status != "ready" || conv.ClassSince == nil || !conv.ClassSince.Equal(at) || conv.NodeName != pre.NodeName {
		t.Fatalf("converted node %+v", conv)
	}
	e.clk.Step(time.Hour)
	end := e.clk.Now()
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end), "", 200, &u)
	var lines []apiv1.UsageLine
	for _, l := range u.LineItems {
		if l.NodeID == pre.NodeID {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("usage lines of the converted node: %+v, want two", lines)
	}
	p, s := lines[0], lines[1]
	if p.ComputeClass != "preemptible" || p.RatePerGPUHour != "0.445" || !p.End.Equal(at) {
		t.Fatalf("preemptible line %+v, want it to end at %s at 0.445", p, at)
	}
	if s.ComputeClass != "standard" || s.RatePerGPUHour != "0.89" || !s.Start.Equal(at) || s.BilledSeconds != int64(end.Sub(at)/time.Second) {
		t.Fatalf("standard line %+v, want it from %s at 0.89", s, at)
	}
	// The event says so.
	var evs apiv1.EventList
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID+"/events", "", 200, &evs)
	found := false
	for _, ev := range evs.Events {
		found = found || (ev.Reason == "NodeConverted" && ev.NodeName == pre.NodeName)
	}
	if !found {
		t.Fatalf("no NodeConverted event in %+v", evs.Events)
	}
}

// TestConvertNodeBadInput: every bad request is refused with a message
// and changes nothing.
func TestConvertNodeBadInput(t *testing.T) {
	e, c, _ := usageWorld(t)
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	pre, std := nodeOf(got, "preemptible"), nodeOf(got, "standard")
	path := func(node string) string { return fmt.Sprintf("/v1/clusters/%s/nodes/%s/convert", c.ClusterID, node) }
	for _, tc := range []struct {
		who, path, body string
		status          int
		field, msg      string
	}{
		{"p", path(pre.NodeID), `{}`, 400, "compute_class", "set compute_class"},
		{"p", path(pre.NodeID), `{"compute_class":"spot"}`, 400, "compute_class", "standard or preemptible"},
		{"p", path(pre.NodeID), `{"compute_class":"standard","num_gpus":8}`, 400, "num_gpus", "unknown field"},
		{"p", path(pre.NodeID), `{"compute_class":"` + strings.Repeat("x", 5000) + `"}`, 400, "compute_class", "standard or preemptible"},
		{"q", path(pre.NodeID), `{"compute_class":"standard"}`, 404, "", "not found"},
		{"p", path("gpu-dp-99"), `{"compute_class":"standard"}`, 404, "", `node "gpu-dp-99" not found`},
		{"p", path(pre.NodeID), `{"compute_class":"preemptible"}`, 409, "", "preemptible already"},
		{"p", path(pre.NodeID), `{"compute_class":"standard"}`, 409, "", "reservation"},
		{"p", path(std.NodeName), `{"compute_class":"preemptible"}`, 409, "", "no standard node"},
	} {
		got := e.apiErr(tc.who, "POST", tc.path, tc.body, tc.status)
		if got.Field != tc.field || !strings.Contains(got.Message, tc.msg) || len(got.Message) > 400 {
			t.Errorf("%s %s: %+v, want field %q and %q", tc.path, tc.body[:min(len(tc.body), 40)], got, tc.field, tc.msg)
		}
	}
	var after apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &after)
	if after.NumGPUs != got.NumGPUs || after.DesiredPreemptibleGPUs != got.DesiredPreemptibleGPUs || nodeOf(after, "preemptible").NodeID == "" {
		t.Fatalf("a refused conversion changed the cluster: %+v", after)
	}
}
