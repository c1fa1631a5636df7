package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/sim"
)

// TestRegisterProviderNodesAreSchedulable: the register provider stands
// in for a kubelet: its Node has the capacity a scheduler needs (pods and
// the machine's GPUs as nvidia.com/gpu) and a heartbeat that stays
// current, so a node lifecycle controller does not take it for dead.
func TestRegisterProviderNodesAreSchedulable(t *testing.T) {
	reset(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl, err := sim.New(sim.Config{Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	kc := env.Kubeconfig()
	kubes := kube.NewPlatform(func(context.Context, string) ([]byte, error) { return kc, nil }, kube.Options{})
	router := kubeRouter(kubes, fl)
	defer router.Close()
	reg := kube.NewRegistrar(kubes, fl)
	reg.Every = 300 * time.Millisecond
	go reg.Run(ctx)

	spec := driver.NodeSpec{ClusterID: "c-reg", NodeName: "gpu-dp-1", MachineID: "m1", Class: domain.Standard, GPUs: 8,
		Labels: map[string]string{domain.LabelComputeClass: "standard", domain.LabelNodeID: "n-1"}}
	if done, err := reg.Prepare(ctx, domain.Machine{ID: "m1", GPUs: 8}, spec); err != nil || !done {
		t.Fatalf("prepare: %v %v", done, err)
	}
	if err := router.AddNode(ctx, spec); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	n := node(t, "gpu-dp-1")
	for name, want := range map[corev1.ResourceName]int64{corev1.ResourcePods: 110, kube.ResourceGPU: 8} {
		c, a := n.Status.Capacity[name], n.Status.Allocatable[name]
		if c.Value() != want || a.Value() != want {
			t.Errorf("%s: capacity %v allocatable %v, want %d", name, c.String(), a.String(), want)
		}
	}
	if n.Labels[domain.LabelNodeID] != "n-1" || !kube.Ready(n) {
		t.Fatalf("node %+v", n.ObjectMeta)
	}
	beat := heartbeat(n)
	eventually(t, 10*time.Second, func() error {
		if now := heartbeat(node(t, "gpu-dp-1")); !now.After(beat) {
			return fmt.Errorf("heartbeat still %v", now)
		}
		return nil
	})
}

func heartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
