package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/providertest"
)

// TestProvider runs the machine provider suite that the register and exec
// providers pass, on simulated machines that take their time.
func TestProvider(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f, err := New(Config{Clock: clk, ProvisionTime: 3 * time.Second, WipeTime: 2 * time.Second, Pods: []PodTemplate{},
		StatePath: t.TempDir() + "/sim-state.json"})
	if err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, &providerHarness{f: f, clk: clk})
}

type providerHarness struct {
	f   *Fleet
	clk *clock.Fake
}

func (h *providerHarness) Provider() driver.MachineProvider { return h.f }
func (h *providerHarness) ClusterID() string                { return "c-provider" }
func (h *providerHarness) Pass(d time.Duration)             { h.clk.Step(d) }
func (h *providerHarness) Now() time.Time                   { return h.clk.Now() }

// Machine: the simulated machine's last job, and whether it is done.
func (h *providerHarness) Machine(t *testing.T, m domain.Machine, clusterID, nodeName string) providertest.Machine {
	v, ok := h.f.Machine(m.ID)
	if !ok {
		return providertest.Machine{}
	}
	job := "wipe"
	if v.Phase == MachinePreparing || v.Phase == MachinePrepared {
		job = "prepare"
	}
	return providertest.Machine{
		Prepared: v.Phase == MachinePrepared && v.ClusterID == clusterID && v.NodeName == nodeName,
		Wiped:    v.Phase == MachineWiped && v.NodeName == nodeName,
		Work:     fmt.Sprintf("%s %s/%s since %s", job, v.ClusterID, v.NodeName, v.StartedAt.Format(time.RFC3339Nano)),
	}
}

// Failing: a machine the fleet does not know how to name.
func (h *providerHarness) Failing(t *testing.T) (domain.Machine, driver.NodeSpec, bool) {
	m := domain.Machine{GPUs: 8}
	return m, providertest.Spec(h, m, "pt-failing"), true
}
