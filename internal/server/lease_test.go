package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// TestMinLeaseFromTheFleetFile: a pool's min_lease in the fleet file
// reaches the API (each ready preemptible node's lease_end is its
// ready_at plus the lease) and the plans (another cluster's fair share
// does not take the leased nodes while the lease lasts).
func TestMinLeaseFromTheFleetFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte("pools: [{region: r1, gpu_type: H100, machines: 4, min_lease: 2h}]\nprices: {H100: \"2\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const adm = "adm-0123456789abcdef0123456789abcdef"
	srv, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: adm, Speed: 100, FleetFile: fleetFile})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.New(srv.URL, adm)
	if _, err := c.CreateProject(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	create := func(name string, pre int) *apiv1.Cluster {
		cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: name, Region: "r1", GPUType: "H100",
			ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: pre})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	train := create("train", 16)
	var ready []apiv1.Node
	waitFor(t, "two preemptible nodes ready", func() bool {
		cl, err := c.GetCluster(ctx, train.ClusterID)
		if err != nil {
			return false
		}
		ready = nil
		for _, n := range cl.GPUWorkerNodes {
			if n.ComputeClass == "preemptible" && n.Status == "ready" {
				ready = append(ready, n)
			}
		}
		return len(ready) == 2
	})
	for _, n := range ready {
		if n.LeaseEnd == nil || n.ReadyAt == nil || !n.LeaseEnd.Equal(n.ReadyAt.Add(2*time.Hour)) {
			t.Fatalf("node %s: ready %v, lease end %v; want ready + 2h", n.NodeName, n.ReadyAt, n.LeaseEnd)
		}
	}
	// Another tenant wants its share: the two leased nodes stay for the
	// lease (about 70 s of real time at this speed; watched for 5).
	other := create("other", 16)
	time.Sleep(5 * time.Second)
	cl, err := c.GetCluster(ctx, train.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" && n.Status != "ready" {
			t.Fatalf("a leased node was taken for a fair share: %+v", n)
		}
	}
	// The other tenant reads that it waits for the lease (not that its
	// nodes are being provisioned) and until when.
	if cl, err = c.GetCluster(ctx, other.ClusterID); err != nil {
		t.Fatal(err)
	}
	first := *ready[0].LeaseEnd
	if ready[1].LeaseEnd.Before(first) {
		first = *ready[1].LeaseEnd
	}
	end := first.UTC().Format(time.RFC3339)
	if u := cl.TargetUnfulfilled; u == nil || u.Reason != "WaitingForLease" || !strings.HasSuffix(u.Message, "waiting for a lease to end at "+end) {
		t.Fatalf("the other tenant's target_unfulfilled: %+v, want WaitingForLease until %s", u, end)
	}
}
