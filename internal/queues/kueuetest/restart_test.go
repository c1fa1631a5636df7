package kueuetest

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/queues/admission"
)

// TestCheckSurvivesRestarts: the check's state lives in the workloads'
// status and sparecap's store. A sparecap restart leaves an admitted
// workload as it is; so do a restart of Kueue and another of sparecap
// while Kueue is down; a reclaim afterwards gets the workload evicted
// and requeued within seconds, and it completes once the target is
// refilled.
func TestCheckSurvivesRestarts(t *testing.T) {
	w := newWorld(t, 3, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 16, 0)
	apply(t, "kueue-setup")
	w.WaitReady("tenant", 2, 60*time.Second)
	job := submitJob(t, "resilient", "30s")
	wl := waitWorkload(t, job, 30*time.Second, "admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	readyAt := checkOf(wl).LastTransitionTime
	unchanged := func(what string) {
		t.Helper()
		time.Sleep(3 * time.Second) // a few passes of the manager
		wl := waitWorkload(t, job, 10*time.Second, "still admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
		if st := checkOf(wl); st.State != admission.StateReady || !st.LastTransitionTime.Equal(&readyAt) {
			t.Fatalf("after %s the check is %+v, want Ready since %s", what, st, readyAt)
		}
	}

	// sparecap restarts: the admitted workload is left alone.
	w.Stop()
	w.Start()
	unchanged("sparecap's restart")

	// Kueue goes down; sparecap restarts meanwhile; Kueue comes back.
	// (While Kueue's webhooks are down no pod in the namespace can be
	// written, so kwok could not play a reclaimed pod's exit: the reclaim
	// waits for Kueue.)
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
	time.Sleep(2 * time.Second)
	if err := env.StartKueue(); err != nil {
		t.Fatal(err)
	}
	kueueUp = true
	unchanged("Kueue's restart")

	w.Create("other", "q", 8, 0, 0)
	decided := w.WaitDraining("tenant", 30*time.Second).DrainStartedAt
	waitWorkload(t, job, 20*time.Second, "evicted by the check", func(w *admission.Workload) bool {
		c := condOf(w, "Evicted")
		return c.Status == metav1.ConditionTrue && c.Reason == "AdmissionCheck"
	})
	t.Logf("after both restarts: workload evicted %s after the reclaim decision", time.Since(decided).Round(100*time.Millisecond))

	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 90*time.Second)
	waitJobComplete(t, job, 120*time.Second)
}
