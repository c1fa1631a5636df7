package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/server"
)

// TestServerAttach runs the whole server with the register provider: a
// cluster created with a kubeconfig gets its nodes in that API server at
// once; a cluster attached later gets its next nodes there (the driver is
// reloaded); the API never shows the kubeconfig or the server's address.
func TestServerAttach(t *testing.T) {
	reset(t)
	ctx := context.Background()
	srv, c := startServer(t, kube.Options{NodeLabels: map[string]string{"example.com/pool": "spare"}})
	req := apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "attached", Region: "us-central-2", GPUType: "RTX_6000_PCI",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: 8, Kubeconfig: string(env.Kubeconfig())}
	a, err := c.CreateCluster(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Kubernetes.Attached {
		t.Fatalf("created with a kubeconfig but %+v", a.Kubernetes)
	}
	wantNodes(t, map[string]string{"gpu-dp-1": "standard", "gpu-preemptible-dp-2": "preemptible"})
	if got, err := c.GetCluster(ctx, a.ClusterID); err != nil || len(got.GPUWorkerNodes) != 2 || got.GPUWorkerNodes[0].GPUType != "RTX_6000_PCI" || got.GPUWorkerNodes[1].GPUType != "RTX_6000_PCI" {
		t.Fatalf("the API's nodes do not say their GPU type: %+v (%v)", got.GPUWorkerNodes, err)
	}

	// The API shows that it is attached, never the kubeconfig or where it
	// points.
	resp, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/clusters/"+a.ClusterID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer "+adminToken)
	r, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	host := env.RESTConfig().Host
	if !strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"attached":true`) || strings.Contains(string(body), strings.TrimPrefix(host, "https://")) || strings.Contains(string(body), "certificate-authority") {
		t.Fatalf("cluster JSON: %s", body)
	}

	// Delete it: its nodes leave the API server.
	if _, err := c.DeleteCluster(ctx, a.ClusterID); err != nil {
		t.Fatal(err)
	}
	wantNodes(t, map[string]string{})

	// A cluster on the simulation, attached later: its next node is real.
	req.ClusterName, req.Kubeconfig, req.NumPreemptibleGPUs = "later", "", 0
	b, err := c.CreateCluster(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, b.ClusterID, 1)
	wantNodes(t, map[string]string{}) // simulated
	if _, err := c.AttachKubeconfig(ctx, b.ClusterID, env.Kubeconfig()); err != nil {
		t.Fatal(err)
	}
	eight := 8
	if _, err := c.UpdateCluster(ctx, b.ClusterID, apiv1.UpdateClusterRequest{NumPreemptibleGPUs: &eight}); err != nil {
		t.Fatal(err)
	}
	wantNodes(t, map[string]string{"gpu-preemptible-dp-2": "preemptible"})
}

// adminToken is the servers' of these tests.
const adminToken = "adm-0123456789abcdef0123456789abcdef"

// startServer starts a server on the built-in fleet whose machines join
// the test's API server (the register provider), with the project team,
// and returns it and an admin client; it is closed with the test.
func startServer(t *testing.T, opts kube.Options) (*server.Server, *client.Client) {
	t.Helper()
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), AdminToken: adminToken,
		MachineProvider: "register", ProvisionTime: -1, WipeTime: -1, Kube: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := client.New(srv.URL, adminToken)
	if _, err := c.CreateProject(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// wantNodes waits until the API server has exactly these nodes (name to
// compute class), each Ready, with the operator's label and its GPU
// type's.
func wantNodes(t *testing.T, want map[string]string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		nodes, err := env.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, n := range nodes.Items {
			if !kube.Ready(&n) || n.Labels["example.com/pool"] != "spare" || n.Labels[domain.LabelGPUType] != "RTX_6000_PCI" {
				return fmt.Errorf("node %s: ready %v, labels %v", n.Name, kube.Ready(&n), n.Labels)
			}
			got[n.Name] = n.Labels[domain.LabelComputeClass]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("nodes %v, want %v", got, want)
		}
		return nil
	})
}

func waitReady(t *testing.T, c *client.Client, id string, nodes int) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		cl, err := c.GetCluster(context.Background(), id)
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range cl.GPUWorkerNodes {
			if n.ReadyAt != nil {
				ready++
			}
		}
		if ready != nodes {
			return fmt.Errorf("%d of %d nodes ready: %+v", ready, nodes, cl.GPUWorkerNodes)
		}
		return nil
	})
}

// TestServerAttachChecksPermissions: the server asks the cluster what the
// kubeconfig's identity may do before it stores it. Without delete on
// pods the attach is refused, naming what is missing and storing nothing;
// without patch on pods/status it succeeds, and the cluster's status and
// its events say what the tenant loses.
func TestServerAttachChecksPermissions(t *testing.T) {
	reset(t)
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
	req := apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "checked", Region: "us-central-2", GPUType: "RTX_6000_PCI",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8}
	cl, err := c.CreateCluster(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	noDelete, _ := grant(t, "attach-no-delete", "delete pods")
	_, err = c.AttachKubeconfig(ctx, cl.ClusterID, noDelete)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "delete pods") ||
		!strings.Contains(err.Error(), "cannot work without") || strings.Contains(err.Error(), strings.TrimPrefix(env.RESTConfig().Host, "https://")) {
		t.Fatalf("attach without delete on pods: %v", err)
	}
	if got, err := c.GetCluster(ctx, cl.ClusterID); err != nil || got.Kubernetes.Attached || got.Access != nil {
		t.Fatalf("a refused attach stored something: %+v, %v", got, err)
	}
	// A create with such a kubeconfig creates nothing.
	req.ClusterName, req.Kubeconfig = "refused", string(noDelete)
	if _, err := c.CreateCluster(ctx, req); err == nil || !strings.Contains(err.Error(), "delete pods") {
		t.Fatalf("create with a kubeconfig without delete on pods: %v", err)
	}

	noStatus, _ := grant(t, "attach-no-status", "patch pods/status")
	got, err := c.AttachKubeconfig(ctx, cl.ClusterID, noStatus)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Access; !got.Kubernetes.Attached || a == nil || a.CheckedAt == nil || len(a.Missing) != 1 ||
		a.Missing[0].Permission != "patch pods/status" || a.Missing[0].Essential || !strings.Contains(a.Missing[0].Effect, "grant patch on pods/status") {
		t.Fatalf("attach without patch on pods/status: %+v, access %+v", got.Kubernetes, got.Access)
	}
	evs, err := c.ListEvents(ctx, cl.ClusterID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Events {
		if e.Reason == string(domain.ReasonPermissionMissing) && strings.Contains(e.Message, "patch pods/status") {
			found = true
		}
	}
	if !found {
		t.Errorf("no PermissionMissing event: %+v", evs)
	}
}
