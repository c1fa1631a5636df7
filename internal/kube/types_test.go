package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
)

// TestATargetOverTwoTypesOnTheAPIServer, on a real API server: in the
// built-in fleet's eu-west-1 (A100_SXM and L40S), a cluster whose
// preemptible target prefers L40S while standard nodes hold every L40S
// machine gets its preemptible node from A100_SXM, and the Node says so
// in sparecap.dev/gpu-type.
func TestATargetOverTwoTypesOnTheAPIServer(t *testing.T) {
	reset(t)
	ctx := context.Background()
	_, c := startServer(t, kube.Options{}) // globex is the built-in fleet's
	// Standard nodes on all four L40S machines (two on demand, globex's two).
	for _, r := range []apiv1.CreateClusterRequest{
		{ProjectID: "team", ClusterName: "std", BillingType: "ON_DEMAND"},
		{ProjectID: "globex", ClusterName: "own", BillingType: "RESERVED"},
	} {
		r.Region, r.GPUType, r.ClusterType, r.NumGPUs = "eu-west-1", "L40S", "KUBERNETES", 16
		if _, err := c.CreateCluster(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "spread", Region: "eu-west-1", GPUType: "A100_SXM",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: 8,
		PreemptibleGPUTypes: []string{"L40S", "A100_SXM"}, Kubeconfig: string(env.Kubeconfig())})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		nodes, err := env.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: domain.LabelComputeClass + "=preemptible"})
		if err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Labels[domain.LabelGPUType] != "A100_SXM" {
			var labels []map[string]string
			for _, n := range nodes.Items {
				labels = append(labels, n.Labels)
			}
			return fmt.Errorf("preemptible Nodes %d, labelled %v", len(nodes.Items), labels)
		}
		return nil
	})
	got, err := c.GetCluster(ctx, m.ClusterID)
	if err != nil || got.AllocatedPreemptibleGPUs != 8 || fmt.Sprint(got.PreemptibleGPUTypes) != "[L40S A100_SXM]" {
		t.Fatalf("cluster %+v (%v)", got, err)
	}
}
