package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// TestABorrowerLearnsThePoolNotItsOwner: what a tenant reads of a node
// lent from another's reservation (its NodeAdded, a failed preparation, a
// registration timeout, a failed wipe, its labels) names the capacity
// ("reserved capacity in us-east-1"), never the machine, whose ID names
// the reservation's owner.
func TestABorrowerLearnsThePoolNotItsOwner(t *testing.T) {
	var cfg Config
	m := domain.Machine{ID: "rsv-acme-us-east-1-h100-sxm-02", Region: "us-east-1", GPUType: "H100_SXM", GPUs: 8, ReservationID: "acme", Failures: 4}
	n := domain.Node{ID: "n-1", ClusterID: cluster, MachineID: m.ID, Name: "gpu-preemptible-dp-1", Class: domain.Preemptible,
		GPUs: 8, State: domain.NodeProvisioning, CreatedAt: t0, ProvisioningAt: t0}
	facts := Facts{Tells: true, ProviderTells: true, Machine: m, FirstPrepare: t0}
	told := map[string]string{}
	note := func(what string, r Ready) {
		for _, e := range r.Events {
			told[what+" event"] = e.Message
		}
	}
	r := Step(cfg, Input{Node: n, Now: t0, Facts: facts, Phase: PhaseAdded, Results: []Result{{Call: Call{Kind: CallAddNode}}}})
	note("NodeAdded", r)
	r = Step(cfg, Input{Node: n, Now: t0, Facts: facts, Phase: PhasePrepared,
		Results: []Result{{Call: Call{Kind: CallPrepare}, Err: errors.New("boot failed")}}})
	told["ProvisionFailed"] = r.Err.Error()
	late := t0.Add(time.Hour)
	r = Step(cfg, Input{Node: n, Now: late, Facts: facts, Phase: PhasePrepared, Carry: Carry{Late: true},
		Results: []Result{{Call: Call{Kind: CallPrepare}}}})
	note("RegistrationFailed", r)
	gone := n
	gone.State, gone.RemovedAt, gone.CleanupPending = domain.NodeRemoving, t0, true
	r = Step(cfg, Input{Node: gone, Now: late, Facts: facts, Phase: PhaseWiped,
		Results: []Result{{Call: Call{Kind: CallWipe}, Err: errors.New("wipe failed")}}})
	if r.Err != nil {
		told["DeprovisionFailed"] = r.Err.Error()
	}
	for k, v := range driver.Spec(n).Labels {
		told["label "+k] = v
	}
	if len(told) < 5 {
		t.Fatalf("fewer messages than asked for: %q", told)
	}
	for what, msg := range told {
		if strings.Contains(msg, "acme") || strings.Contains(msg, m.ID) {
			t.Errorf("%s names the machine or its owner: %q", what, msg)
		}
	}
	for _, what := range []string{"NodeAdded event", "ProvisionFailed", "RegistrationFailed event"} {
		if !strings.Contains(told[what], "reserved capacity in us-east-1") {
			t.Errorf("%s does not name the capacity: %q", what, told[what])
		}
	}
}
