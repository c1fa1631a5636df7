package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/providertest"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/sim"
)

// TestProvider runs the machine provider suite that the simulated fleet
// and the exec provider pass, on the register provider against the real
// API server.
func TestProvider(t *testing.T) {
	reset(t)
	fl, err := sim.New(sim.Config{Clock: clock.Real{}, Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	kc := env.Kubeconfig()
	kubes := kube.NewPlatform(func(_ context.Context, id string) ([]byte, error) {
		switch id {
		case "c-provider":
			return kc, nil
		case "c-broken":
			return nil, errors.New("the store is down")
		}
		return nil, nil
	}, kube.Options{})
	defer kubes.Close()
	providertest.Run(t, &providerHarness{reg: kube.NewRegistrar(kubes, fl)})
}

type providerHarness struct{ reg *kube.Registrar }

func (h *providerHarness) Provider() driver.MachineProvider { return h.reg }
func (h *providerHarness) ClusterID() string                { return "c-provider" }
func (h *providerHarness) Pass(d time.Duration)             { time.Sleep(d) }
func (h *providerHarness) Now() time.Time                   { return time.Now() }

// Machine: the node's Node object, registered Ready; there is nothing to
// wipe.
func (h *providerHarness) Machine(t *testing.T, m domain.Machine, clusterID, nodeName string) providertest.Machine {
	n := node(t, nodeName)
	if n == nil {
		return providertest.Machine{Wiped: true}
	}
	return providertest.Machine{Prepared: kube.Ready(n) && n.Labels[kube.LabelRegistered] == "true", Wiped: true, Work: string(n.UID)}
}

// Failing: a cluster whose kubeconfig cannot be read.
func (h *providerHarness) Failing(t *testing.T) (domain.Machine, driver.NodeSpec, bool) {
	m := domain.Machine{ID: "m-broken", GPUs: 8}
	spec := providertest.Spec(h, m, "pt-broken")
	spec.ClusterID = "c-broken"
	return m, spec, false
}
