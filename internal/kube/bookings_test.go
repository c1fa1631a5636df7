package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
	"github.com/sparecap/sparecap/internal/server"
)

// TestABookingAnnouncesOnTheAPIServer, on a real API server: a cluster
// booked an hour ahead claims the preemptible node on the on-demand L40S
// machine it will take; the Node and its pod carry
// sparecap.dev/preempt-at with the notice's time at once. Moved to start
// in seconds, the annotation follows, and the notice comes at that time.
func TestABookingAnnouncesOnTheAPIServer(t *testing.T) {
	reset(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	const window = 6 * time.Second
	c := startServerWith(t, server.Options{DrainWindow: window})
	// eu-west-1's L40S: two on demand (a standard node, a preemptible
	// one) and globex's two, lent while globex does not use them.
	pre, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "pre", Region: "eu-west-1", GPUType: "L40S",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: 24, Kubeconfig: string(env.Kubeconfig())})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, pre.ClusterID, 4)
	onDemand := preemptibleOnDemand(t, c, pre.ClusterID)
	startPod(t, onDemand, "default", "trainer", 30*time.Second, -1, false)

	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	b, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "booked", Region: "eu-west-1", GPUType: "L40S",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, StartsAt: &start})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != string(domain.StatusScheduled) || b.ActiveAt == nil {
		t.Fatalf("booking %+v", b)
	}
	wantAnnounced(t, onDemand, *b.ActiveAt)

	soon := time.Now().Add(window + 15*time.Second).UTC().Truncate(time.Second)
	moved, err := c.UpdateCluster(ctx, b.ClusterID, apiv1.UpdateClusterRequest{StartsAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	if moved.ActiveAt == nil || !moved.ActiveAt.After(time.Now()) {
		t.Fatalf("moved booking %+v: its notice should still be ahead", moved)
	}
	wantAnnounced(t, onDemand, *moved.ActiveAt)
	eventually(t, time.Until(*moved.ActiveAt)+20*time.Second, func() error {
		cl, err := c.GetCluster(ctx, pre.ClusterID)
		if err != nil {
			return err
		}
		for _, n := range cl.GPUWorkerNodes {
			if n.NodeName == onDemand && n.Deadline != nil {
				if notice := n.Deadline.Add(-window); notice.Sub(*moved.ActiveAt).Abs() > 2*time.Second {
					t.Errorf("notice at %s, announced for %s", notice, moved.ActiveAt)
				}
				return nil
			}
		}
		return fmt.Errorf("no notice on %s yet", onDemand)
	})
}

// startServerWith is startServer with opts (the register provider, the
// built-in fleet, project team).
func startServerWith(t *testing.T, opts server.Options) *client.Client {
	t.Helper()
	opts.Addr, opts.DataDir, opts.AdminToken = "127.0.0.1:0", t.TempDir(), adminToken
	opts.MachineProvider, opts.ProvisionTime, opts.WipeTime = "register", -1, -1
	srv, err := server.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := client.New(srv.URL, adminToken)
	if _, err := c.CreateProject(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	return c
}

// preemptibleOnDemand is the name of the cluster's preemptible node on an
// on-demand machine (the others are on globex's reservation).
func preemptibleOnDemand(t *testing.T, c *client.Client, clusterID string) string {
	t.Helper()
	ms, err := c.ListMachines(context.Background(), client.ListMachinesOptions{Region: "eu-west-1", GPUType: "L40S"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Machines {
		if m.ClusterID == clusterID && m.Pool == "on-demand" && m.NodeName != "gpu-dp-1" {
			return m.NodeName
		}
	}
	t.Fatalf("no preemptible node on an on-demand machine: %+v", ms.Machines)
	return ""
}

// wantAnnounced waits until the Node and its pods carry at as
// sparecap.dev/preempt-at.
func wantAnnounced(t *testing.T, node string, at time.Time) {
	t.Helper()
	want := at.UTC().Format(time.RFC3339)
	eventually(t, 30*time.Second, func() error {
		n, err := env.Client().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Annotations[domain.AnnotationPreemptAt]; got != want {
			return fmt.Errorf("node %s: %s=%q, want %q", node, domain.AnnotationPreemptAt, got, want)
		}
		pods, err := env.Client().CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pod on %s", node)
		}
		for _, p := range pods.Items {
			if got := p.Annotations[domain.AnnotationPreemptAt]; got != want {
				return fmt.Errorf("pod %s: %s=%q, want %q", p.Name, domain.AnnotationPreemptAt, got, want)
			}
		}
		return nil
	})
}
