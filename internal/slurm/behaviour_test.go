package slurm_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/drivertest"
	"github.com/sparecap/sparecap/internal/slurm"
)

// TestBehaviour runs the driver behaviour suite against the real
// slurmctld: the same suite the Kubernetes and simulated drivers pass.
func TestBehaviour(t *testing.T) {
	c := newCluster(t, env, slurm.Options{})
	drivertest.Run(t, &harness{c: c, id: c.ID()})
}

type harness struct {
	c  *slurm.Cluster
	id string
}

func (h *harness) Platform() string             { return drivertest.Slurm }
func (h *harness) Driver() driver.ClusterDriver { return h.c }
func (h *harness) ClusterID() string            { return h.id }

func (h *harness) Join(t *testing.T, spec driver.NodeSpec) { join(t, env, spec) }

// StartPod submits a batch job pinned to the node, as the account
// p.Namespace, named p.Name, and waits until it runs.
func (h *harness) StartPod(t *testing.T, node string, p drivertest.PodSpec) {
	t.Helper()
	j := job{Node: node, Account: p.Namespace, Name: p.Name}
	if p.ExitAfter >= 0 {
		j.OnTerm = fmt.Sprintf("sleep %.1f; exit 0", p.ExitAfter.Seconds())
	}
	id := submit(t, env, j)
	eventually(t, 20*time.Second, func() error {
		if s := jobByID(t, env, id).State; s != "RUNNING" {
			return fmt.Errorf("job %s is %s", id, s)
		}
		return nil
	})
}

func (h *harness) Node(t *testing.T, name string) (drivertest.NodeState, bool) {
	t.Helper()
	n, ok := nodeOf(t, env, name)
	if !ok {
		return drivertest.NodeState{}, false
	}
	s := drivertest.NodeState{Draining: slices.Contains(n.Flags, "DRAIN") || n.State == "down"}
	for _, f := range strings.Split(n.Features, ",") {
		if f == "preemptible" || f == "standard" {
			s.Class = f
		}
	}
	var x map[string]string
	if n.Extra != "" {
		if err := json.Unmarshal([]byte(n.Extra), &x); err != nil {
			t.Fatalf("node %s: Extra is not JSON: %q", name, n.Extra)
		}
	}
	s.Deadline, s.Cause = x["sparecap.dev/deadline"], x["sparecap.dev/cause"]
	if s.Draining && !strings.HasPrefix(n.Reason, "sparecap: "+s.Cause+"; deadline "+s.Deadline) {
		t.Errorf("node %s: drain reason %q does not say the cause and deadline", name, n.Reason)
	}
	return s, true
}

// Events reads the notices in the node's Extra and in the AdminComment of
// the jobs on it ("[Warning] Reason: message").
func (h *harness) Events(t *testing.T, name string) []drivertest.Event {
	t.Helper()
	var out []drivertest.Event
	if n, ok := nodeOf(t, env, name); ok {
		var x map[string]string
		json.Unmarshal([]byte(n.Extra), &x)
		if e, ok := parseNotice("Node/"+name, x["sparecap.dev/notice"]); ok {
			out = append(out, e)
		}
	}
	for _, j := range jobs(t, env) {
		if j.Nodes != name {
			continue
		}
		_, notice, _ := strings.Cut(j.AdminComment, "; ")
		if e, ok := parseNotice("Work/"+j.Account+"/"+j.Name, notice); ok {
			out = append(out, e)
		}
	}
	return out
}

func parseNotice(obj, s string) (drivertest.Event, bool) {
	kind, rest, ok := strings.Cut(strings.TrimPrefix(s, "["), "] ")
	if !ok {
		return drivertest.Event{}, false
	}
	reason, _, _ := strings.Cut(rest, ":")
	return drivertest.Event{Object: obj, Type: kind, Reason: reason}, true
}

func (h *harness) Pass(d time.Duration) { time.Sleep(d) }

func (h *harness) Now() time.Time { return time.Now() }

func (h *harness) Eventually(t *testing.T, check func() error) {
	t.Helper()
	eventually(t, 20*time.Second, check)
}
