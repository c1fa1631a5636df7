package kube_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// TestDemandTakesWhatHurtsLeast, on the real API server: a JobSet's pods
// on 4 preemptible nodes and 4 single-pod Jobs on 4 others. Standard
// demand for 4 nodes takes the JobSet's 4 (one job stopped, not four),
// and says so in the nodes' events. Then, of the single Jobs, the one
// that checkpointed a minute ago goes before those that have not in an
// hour or more.
func TestDemandTakesWhatHurtsLeast(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 8, window: 30 * time.Second, attached: []string{"c-harm"}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-harm", 0, 64)
	nodes := f.waitNodes("c-harm", domain.Preemptible, domain.NodeReady, 8, 30*time.Second)
	slices.SortFunc(nodes, func(a, b domain.Node) int { return strings.Compare(a.Name, b.Name) })
	now := time.Now()
	checkpoints := []time.Duration{time.Hour, time.Minute, 2 * time.Hour, 3 * time.Hour}
	var gang, singles []string
	for i, n := range nodes {
		labels := map[string]string{"jobset.sigs.k8s.io/jobset-name": "train"}
		ann := map[string]string{}
		if i%2 == 1 {
			labels = map[string]string{"batch.kubernetes.io/job-name": fmt.Sprintf("eval-%d", i)}
			ann[domain.AnnotationLastCheckpoint] = now.Add(-checkpoints[len(singles)]).UTC().Format(time.RFC3339)
			singles = append(singles, n.ID)
		} else {
			gang = append(gang, n.ID)
		}
		opt := func(p *corev1.Pod) {
			p.Labels = labels
			for k, v := range ann {
				p.Annotations[k] = v
			}
		}
		if _, err := kubelet.CreatePods(f.ctx, env.Client(), "tenant-a", n.Name, 1, 30, podOptions(fmt.Sprintf("w-%d", i), time.Second, false), opt); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, n := range nodes {
			if l := f.router.Load("c-harm", n.Name); !l.Known || l.Idle {
				return fmt.Errorf("node %s: %+v", n.Name, l)
			}
		}
		return nil
	})

	// The Jobs have run for four hours: their pods started then.
	for i := 1; i < len(nodes); i += 2 {
		setStarted(t, f, "tenant-a", fmt.Sprintf("w-%d", i), now.Add(-4*time.Hour))
	}
	eventually(t, 10*time.Second, func() error {
		if l := f.router.Load("c-harm", nodes[7].Name); l.LostGPUSeconds < 3*3600 {
			return fmt.Errorf("node %s: %+v", nodes[7].Name, l)
		}
		return nil
	})

	f.createCluster("c-std", 32, 0) // on the simulated fleet: needs 4 of the 8 machines
	draining := func(want int) []string {
		var ids []string
		eventually(t, 10*time.Second, func() error {
			ids = nil
			for _, n := range f.nodes("c-harm", domain.NodeDraining, domain.NodeRemoving, domain.NodeRemoved) {
				ids = append(ids, n.ID)
			}
			if len(ids) < want {
				return errors.New("not yet")
			}
			return nil
		})
		slices.Sort(ids)
		return ids
	}
	if got, want := draining(4), sorted(gang); !slices.Equal(got, want) {
		t.Fatalf("reclaimed %v, want the JobSet's nodes %v", got, want)
	}
	var why []string
	for _, e := range f.events("c-harm") {
		if e.Reason == domain.ReasonPreemptionNotified {
			why = append(why, e.Message)
		}
	}
	if len(why) != 4 || !strings.Contains(strings.Join(why, "\n"), "stops gang jobset/tenant-a/train") {
		t.Fatalf("the notices' events do not say the gang was chosen: %q", why)
	}

	std := 40
	f.update("c-std", &std, nil)
	got := draining(5)
	if !slices.Contains(got, singles[1]) {
		t.Fatalf("reclaimed %v, want the single Job that checkpointed a minute ago (%s)", got, singles[1])
	}
}

// setStarted sets when a running pod started, as a kubelet reports it.
func setStarted(t *testing.T, f *fixture, ns, name string, at time.Time) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		p, err := env.Client().CoreV1().Pods(ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s", name, p.Status.Phase)
		}
		p.Status.StartTime = &metav1.Time{Time: at}
		_, err = env.Client().CoreV1().Pods(ns).UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestBudgetWithoutHeadroomGoesLast, on the real API server: of two
// preemptible nodes, the one whose work checkpointed a moment ago would
// go first, but a PodDisruptionBudget that allows no disruption selects
// its pod: scaling down by one node takes the other, whose work has run
// an hour.
func TestBudgetWithoutHeadroomGoesLast(t *testing.T) {
	const ns = "tenant-pdb"
	f := newFixture(t, fixtureConfig{machines: 2, window: 30 * time.Second, attached: []string{"c-pdb"}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-pdb", 0, 16)
	nodes := f.waitNodes("c-pdb", domain.Preemptible, domain.NodeReady, 2, 30*time.Second)
	fresh, old := nodes[0], nodes[1]
	now := time.Now()
	for i, n := range nodes {
		labels := map[string]string{"app": "train"}
		ann := map[string]string{}
		if n.ID == fresh.ID {
			labels["app"] = "db"
			ann[domain.AnnotationLastCheckpoint] = now.Add(-time.Minute).UTC().Format(time.RFC3339)
		}
		opt := func(p *corev1.Pod) {
			p.Labels = labels
			for k, v := range ann {
				p.Annotations[k] = v
			}
		}
		if _, err := kubelet.CreatePods(f.ctx, env.Client(), ns, n.Name, 1, 30, podOptions(fmt.Sprintf("w-%d", i), time.Second, false), opt); err != nil {
			t.Fatal(err)
		}
		setStarted(t, f, ns, fmt.Sprintf("w-%d", i), now.Add(-time.Hour))
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	if _, err := env.Client().PolicyV1().PodDisruptionBudgets(ns).Create(f.ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error {
		lf, lo := f.router.Load("c-pdb", fresh.Name), f.router.Load("c-pdb", old.Name)
		if !lf.Protected || lo.Protected || lf.LostGPUSeconds >= lo.LostGPUSeconds {
			return fmt.Errorf("loads: budgeted %+v, other %+v", lf, lo)
		}
		return nil
	})
	pre := 8
	f.update("c-pdb", nil, &pre)
	eventually(t, 10*time.Second, func() error {
		d := f.nodes("c-pdb", domain.NodeDraining, domain.NodeRemoving, domain.NodeRemoved)
		if len(d) != 1 {
			return fmt.Errorf("%d nodes going", len(d))
		}
		if d[0].ID != old.ID {
			t.Fatalf("took %s, the node whose pod the budget protects; want %s", d[0].Name, old.Name)
		}
		return nil
	})
}
