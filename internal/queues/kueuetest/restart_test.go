package kueuetest

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/admission"
)

// TestCheckSurvivesRestarts: the check's state lives in the workloads'
// status and sparecap's store. A sparecap restart leaves an admitted
// workload as it is; a reclaim while Kueue is down is acted on as soon as
// Kueue is back (evicted and requeued within seconds of its return), and
// the workload still completes once the target is refilled.
func TestCheckSurvivesRestarts(t *testing.T) {
	w := newWorld(t, 3, map[string]cluster{"tenant": miniCluster()})
	// While Kueue's webhooks are down the pods cannot be updated, so kwok
	// cannot play their exit: the reclaimed node goes at its deadline.
	w.Window = 20 * time.Second
	w.Start()
	w.Create("tenant", "p", 8, 16, 0)
	apply(t, "kueue-setup")
	w.WaitReady("tenant", 2, 60*time.Second)
	job := submitJob(t, "resilient", "20s")
	wl := waitWorkload(t, job, 30*time.Second, "admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	readyAt := checkOf(wl).LastTransitionTime

	// sparecap restarts: the admitted workload is left alone.
	w.Stop()
	w.Start()
	time.Sleep(3 * time.Second) // a few passes of the new manager
	wl = waitWorkload(t, job, 10*time.Second, "still admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	if st := checkOf(wl); st.State != admission.StateReady || !st.LastTransitionTime.Equal(&readyAt) {
		t.Fatalf("after sparecap's restart the check is %+v, want Ready since %s", st, readyAt)
	}

	// Kueue goes down, sparecap restarts again, and a node of the workload
	// is reclaimed meanwhile.
	if err := env.StopKueue(); err != nil {
		t.Fatal(err)
	}
	kueueUp := false
	t.Cleanup(func() {
		if !kueueUp {
			env.StartKueue()
		}
	})
	w.Stop()
	w.Start()
	w.Create("other", "q", 8, 0, 0)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if len(w.Nodes("tenant", domain.Preemptible, domain.NodeDraining)) == 0 {
			return fmt.Errorf("no preemptible node of the tenant draining")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if err := env.StartKueue(); err != nil {
		t.Fatal(err)
	}
	kueueUp = true
	back := time.Now()
	wl = waitWorkload(t, job, 20*time.Second, "evicted by the check", func(w *admission.Workload) bool {
		c := condOf(w, "Evicted")
		return c.Status == metav1.ConditionTrue && c.Reason == "AdmissionCheck"
	})
	t.Logf("Kueue back: workload evicted %s later", time.Since(back).Round(100*time.Millisecond))

	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 90*time.Second)
	waitJobComplete(t, job, 90*time.Second)
}
