package sim

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// The simulated fleet tells the controller what a node's step waits for,
// as a watch does, and more: since every time here is fixed when a change
// is made, it says when the next thing will happen (a machine prepared or
// wiped, the last of a node's pods gone), so a control plane on a virtual
// clock jumps from one such time to the next instead of polling. Wakes are
// made under the fleet's lock and must not call the fleet.

// SetHooks sets the hook the fleet wakes nodes with (the controller's
// Hooks.Wake). The simulation reports no permissions and no notes.
func (f *Fleet) SetHooks(h driver.Hooks) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakeHook = h.Wake
}

// Tells: the fleet wakes every node when what its step waits for changed,
// or at the time it will.
func (f *Fleet) Tells(string) bool { return true }

// wake wakes node (cluster, name) at at (now if zero); under f.mu.
func (f *Fleet) wake(cluster, name string, at time.Time) {
	if f.wakeHook != nil {
		f.wakeHook(cluster, name, at)
	}
}

// wakeWhenQuiet wakes node n when the pods its drain waits for are gone:
// the last of its workload's; with no workload left, the last of its
// support pods', or at once if one of those runs on (the drain stops them
// once the workload is gone). Nothing while a workload pod has no end
// fixed yet (it runs until its notice, or until External says). Under
// f.mu.
func (f *Fleet) wakeWhenQuiet(n *node, now time.Time) {
	support := true
	for _, p := range n.Pods {
		if !p.DaemonSet && p.state(now) != PodGone {
			support = false
		}
	}
	var last time.Time
	for _, p := range n.Pods {
		if p.DaemonSet != support || p.state(now) == PodGone {
			continue
		}
		if p.GoneAt.IsZero() {
			if support {
				f.wake(n.ClusterID, n.Name, now) // to stop it
			}
			return
		}
		if p.GoneAt.After(last) {
			last = p.GoneAt
		}
	}
	f.wake(n.ClusterID, n.Name, last)
}

// marked: n carries sparecap's drain marks (its release then is
// sparecap's own, nothing to tell).
func marked(n *node) bool {
	_, ok := n.Annotations[domain.AnnotationDeadline]
	return ok
}
