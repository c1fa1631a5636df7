package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

// A booking through the API: created Scheduled with its start, it claims
// the preemptible nodes it will take (their preempt_at), holds against a
// later create, moves, and cancels; bad starts are refused.
func TestBookingsThroughTheAPI(t *testing.T) {
	e := newEnv(t)
	// Every machine: one standard node and four preemptible ones, two of
	// them on acme's idle reservation.
	train := e.create("p", strings.Replace(createBody, `"num_preemptible_gpus":16`, `"num_preemptible_gpus":32`, 1))
	e.settle()
	start := e.clk.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	body := func(name string, at time.Time, more string) string {
		return fmt.Sprintf(`{"cluster_name":%q,"region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":16,"starts_at":%q%s}`,
			name, at.Format(time.RFC3339), more)
	}
	b := e.create("p", body("book", start, ""))
	if b.Status != string(domain.StatusScheduled) || b.StartsAt == nil || !b.StartsAt.Equal(start) || b.ActiveAt == nil || !b.ActiveAt.Before(start) || len(b.GPUWorkerNodes) != 0 {
		t.Fatalf("booking %+v", b)
	}
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+train.ClusterID, "", 200, &got)
	claimed := 0
	for _, n := range got.GPUWorkerNodes {
		if n.PreemptAt != nil {
			if claimed++; !n.PreemptAt.Equal(*b.ActiveAt) || n.ComputeClass != "preemptible" {
				t.Errorf("node %+v: preempt_at, want %s on preemptible nodes", n, b.ActiveAt)
			}
		}
	}
	if claimed != 2 {
		t.Fatalf("%d nodes with preempt_at, want 2: %+v", claimed, got.GPUWorkerNodes)
	}

	if got := e.apiErr("p", "POST", "/v1/clusters", strings.Replace(createBody, `"train"`, `"late"`, 1), 409); got.Code != apiv1.CodeNoCapacity || !strings.Contains(got.Message, "booked from "+start.Format(time.RFC3339)) {
		t.Errorf("a create the booking leaves no room for: %+v", got)
	}
	for _, bad := range []struct{ body, field string }{
		{body("past", e.clk.Now().Add(-time.Minute), ""), "starts_at"},
		{body("far", e.clk.Now().Add(400*24*time.Hour), ""), "starts_at"},
		{body("pre", start, `,"num_preemptible_gpus":8`), "starts_at"},
	} {
		if got := e.apiErr("p", "POST", "/v1/clusters", bad.body, 400); got.Field != bad.field {
			t.Errorf("%s: %+v", bad.body, got)
		}
	}
	if got := e.apiErr("p", "PATCH", "/v1/clusters/"+b.ClusterID, `{"starts_at":"`+start.Format(time.RFC3339)+`","num_gpus":8}`, 400); got.Field != "starts_at" {
		t.Errorf("a move with another change: %+v", got)
	}
	if got := e.apiErr("p", "PATCH", "/v1/clusters/"+train.ClusterID, `{"starts_at":"`+start.Format(time.RFC3339)+`"}`, 409); !strings.Contains(got.Message, "not booked ahead") {
		t.Errorf("moving a cluster never booked: %+v", got)
	}
	if got := e.apiErr("p", "PATCH", "/v1/clusters/"+b.ClusterID, `{"num_preemptible_gpus":8}`, 400); got.Field != "starts_at" {
		t.Errorf("a preemptible target on a booking: %+v", got)
	}

	// The forecast takes the booking off the hours from its active_at:
	// certain, not probable.
	var fc apiv1.CapacityForecast
	e.do("p", "GET", "/v1/capacity/forecast?region=us-central-2&gpu_type=RTX_6000_PCI&hours=4", "", 200, &fc)
	free := 0
	for _, h := range fc.Pools[0].Hours {
		free += map[bool]int{true: 1}[h.BookedGPUs == 0]
		if want := map[bool]int{true: 16}[h.Start.Add(time.Hour).After(*b.ActiveAt)]; h.BookedGPUs != want || h.HighGPUs > float64(40-want) {
			t.Errorf("hour %s: booked %d (want %d), high %.1f", h.Start, h.BookedGPUs, want, h.HighGPUs)
		}
	}
	if free == 0 || free == len(fc.Pools[0].Hours) {
		t.Errorf("the forecast's hours before and after the booking: %+v", fc.Pools[0].Hours)
	}

	later := start.Add(3 * time.Hour)
	var moved apiv1.Cluster
	e.do("p", "PATCH", "/v1/clusters/"+b.ClusterID, `{"starts_at":"`+later.Format(time.RFC3339)+`"}`, 200, &moved)
	if !moved.StartsAt.Equal(later) || moved.Status != string(domain.StatusScheduled) {
		t.Errorf("moved %+v", moved)
	}
	e.do("p", "DELETE", "/v1/clusters/"+b.ClusterID, "", 202, nil)
	e.settle()
	got = apiv1.Cluster{}
	e.do("p", "GET", "/v1/clusters/"+train.ClusterID, "", 200, &got)
	for _, n := range got.GPUWorkerNodes {
		if n.PreemptAt != nil {
			t.Errorf("node %s keeps preempt_at %s after the booking was cancelled", n.NodeName, n.PreemptAt)
		}
	}
}

// An operator books a machine out for maintenance: the node on it shows
// its preempt_at, a drain window ahead; bad times are refused.
func TestMaintenanceThroughTheAPI(t *testing.T) {
	e := newEnv(t)
	train := e.create("p", createBody)
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+train.ClusterID, "", 200, &got)
	var node apiv1.Node
	for _, n := range got.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" {
			node = n
		}
	}
	var ms apiv1.MachineList
	e.do("admin", "GET", "/v1/admin/machines", "", 200, &ms)
	mid := ""
	for _, m := range ms.Machines {
		if m.NodeName == node.NodeName && m.ClusterID == train.ClusterID {
			mid = m.MachineID
		}
	}
	for _, bad := range []string{`{"maintenance_at":"tomorrow"}`, `{"maintenance_at":"2020-01-01T00:00:00Z"}`, `{}`} {
		e.apiErr("admin", "PATCH", "/v1/admin/machines/"+mid, bad, 400)
	}
	at := e.clk.Now().Add(6 * time.Hour).UTC().Truncate(time.Second)
	var m apiv1.Machine
	e.do("admin", "PATCH", "/v1/admin/machines/"+mid, `{"maintenance_at":"`+at.Format(time.RFC3339)+`"}`, 200, &m)
	if m.MaintenanceAt == nil || !m.MaintenanceAt.Equal(at) {
		t.Fatalf("machine %+v", m)
	}
	e.settle()
	got = apiv1.Cluster{}
	e.do("p", "GET", "/v1/clusters/"+train.ClusterID, "", 200, &got)
	for _, n := range got.GPUWorkerNodes {
		want := n.NodeID == node.NodeID
		if (n.PreemptAt != nil) != want || (want && !n.PreemptAt.Equal(at.Add(-5*time.Minute))) {
			t.Errorf("node %s preempt_at %v (the maintained node is %s, at %s)", n.NodeName, n.PreemptAt, node.NodeName, at)
		}
	}
	m = apiv1.Machine{}
	e.do("admin", "PATCH", "/v1/admin/machines/"+mid, `{"maintenance_at":""}`, 200, &m)
	if m.MaintenanceAt != nil {
		t.Errorf("maintenance kept: %+v", m)
	}
	e.settle()
	got = apiv1.Cluster{}
	e.do("p", "GET", "/v1/clusters/"+train.ClusterID, "", 200, &got)
	for _, n := range got.GPUWorkerNodes {
		if n.PreemptAt != nil {
			t.Errorf("node %s keeps preempt_at after the maintenance was cancelled", n.NodeName)
		}
	}
}
