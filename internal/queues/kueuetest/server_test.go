package kueuetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/provreq"
	"github.com/sparecap/sparecap/internal/server"
)

// TestServerRunsTheQueueIntegrations: the real server runs the queue
// integrations for a cluster attached through its API: docs/queues.md's
// request raises the target the API shows, and is Provisioned once the
// nodes the register provider made are ready.
func TestServerRunsTheQueueIntegrations(t *testing.T) {
	reset(t)
	env.LogOnFailure(t)
	ctx := context.Background()
	const admin = "adm-0123456789abcdef0123456789abcdef"
	srv, err := server.Start(ctx, server.Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), AdminToken: admin,
		MachineProvider: "register", ProvisionTime: -1, WipeTime: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.New(srv.URL, admin)
	if _, err := c.CreateProject(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "queued", Region: "us-central-2",
		GPUType: "RTX_6000_PCI", ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, MaxPreemptibleGPUs: 32,
		Kubeconfig: string(env.Kubeconfig())})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, "provisioning-request")
	kubeenv.Eventually(t, 60*time.Second, func() error {
		got, err := c.GetCluster(ctx, cl.ClusterID)
		if err != nil {
			return err
		}
		if got.RequestedPreemptibleGPUs != 16 || got.TargetPreemptibleGPUs != 16 || got.AllocatedPreemptibleGPUs != 16 {
			return fmt.Errorf("requested %d, target %d, allocated %d; want 16 each", got.RequestedPreemptibleGPUs,
				got.TargetPreemptibleGPUs, got.AllocatedPreemptibleGPUs)
		}
		return nil
	})
	waitCondition(t, env.Dynamic(), "nightly-eval", provreq.CondProvisioned, metav1.ConditionTrue, 30*time.Second)
}
