package api

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestCleanupPendingAndMachineReason: a removed node whose objects are
// still to be deleted from its cluster is listed with cleanup_pending and
// its outcome; a machine sparecap took out of service shows why, and
// putting it back in service clears the reason and the failure count.
func TestCleanupPendingAndMachineReason(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", strings.Replace(createBody, `"num_preemptible_gpus":16`, `"num_preemptible_gpus":0`, 1))
	e.settle()
	nodes, err := e.st.ListNodes(e.ctx, store.NodeFilter{ClusterID: c.ClusterID})
	if err != nil || len(nodes) != 1 {
		t.Fatalf("%v %+v", err, nodes)
	}
	n := nodes[0]
	// As the controller leaves a lost node whose cluster did not answer.
	err = e.st.Update(e.ctx, func(tx store.Tx) error {
		n.State, n.Outcome, n.RemovedAt, n.CleanupPending = domain.NodeRemoved, domain.OutcomeLost, e.clk.Now(), true
		if err := tx.UpdateNode(e.ctx, n); err != nil {
			return err
		}
		m, err := tx.GetMachine(e.ctx, n.MachineID)
		if err != nil {
			return err
		}
		m.OutOfService, m.Failures, m.OutOfServiceReason = true, 3, "3 nodes in a row did not register Ready within 15m0s"
		return tx.UpdateMachine(e.ctx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	var shown *apiv1.Node
	for i := range got.GPUWorkerNodes {
		if got.GPUWorkerNodes[i].NodeID == n.ID {
			shown = &got.GPUWorkerNodes[i]
		}
	}
	if shown == nil || !shown.CleanupPending || shown.Outcome != "lost" || shown.Status != "removed" {
		t.Fatalf("removed node with cleanup pending: %+v", got.GPUWorkerNodes)
	}
	var list apiv1.MachineList
	e.do("admin", "GET", "/v1/admin/machines?state=out_of_service", "", 200, &list)
	var m apiv1.Machine
	for _, x := range list.Machines {
		if x.MachineID == n.MachineID {
			m = x
		}
	}
	if !strings.Contains(m.OutOfServiceReason, "did not register Ready") || m.RegistrationFailures != 3 {
		t.Fatalf("machine %+v", m)
	}
	var back apiv1.Machine
	e.do("admin", "PATCH", "/v1/admin/machines/"+n.MachineID, `{"out_of_service":false}`, 200, &back)
	if back.OutOfServiceReason != "" || back.RegistrationFailures != 0 || back.State == string(domain.MachineOutOfService) {
		t.Fatalf("back in service: %+v", back)
	}
	// Once cleaned up, the removed node leaves the listing.
	n.CleanupPending = false
	if err := e.st.Update(e.ctx, func(tx store.Tx) error { return tx.UpdateNode(e.ctx, n) }); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(time.Second)
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	for _, x := range got.GPUWorkerNodes {
		if x.NodeID == n.ID {
			t.Fatalf("cleaned-up node still listed: %+v", x)
		}
	}
}
