package lifecycle

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// readyStep is the ready state's step, run when the node's driver says
// something changed (it was deleted, its readiness changed) and by the
// backstop sweep: it checks the node against what its cluster says of it.
// A node deleted behind sparecap's back, found lost by its driver
// (NodeHealth.Lost), or not Ready longer than Config.NodeLostAfter, is
// lost: billing stops now (its removal), its machine goes back through the
// removing step (at once, in this turn), its cleanup is pending, and the
// allocator replaces it. A node marked with another class than its own
// (converted since) is marked again. A cluster that cannot tell (its watch
// has not synced, its API is down) decides nothing. A node not Ready is
// due again when it would be lost.
func readyStep(cfg Config, in Input) Ready {
	n := in.Node
	if in.Phase == PhaseClassSet {
		if r, _ := result(in.Results, CallSetClass); r.Err != nil {
			return failed(Due{}, fmt.Errorf("mark node %s %s: %w", n.Name, n.Class, r.Err))
		}
		return Ready{}
	}
	if !in.Facts.HealthKnown {
		return Ready{}
	}
	h := in.Facts.Health
	if why := LostWhy(cfg, n, h, in.Now); why != "" {
		w := write(in)
		w.State, w.Outcome, w.RemovedAt, w.CleanupPending = domain.NodeRemoving, domain.OutcomeLost, in.Now, true
		return Ready{Write: w, From: domain.NodeReady, Moved: true, Again: true, Events: []domain.Event{{Reason: domain.ReasonNodeLost,
			Message: why + "; billing stopped, its machine is taken back and the node replaced"}}}
	}
	if h.Class != "" && h.Class != n.Class {
		// Converted, and its cluster not told yet (or someone changed its
		// marks): mark it again.
		return Ready{Calls: []Call{{Kind: CallSetClass}}, Next: PhaseClassSet}
	}
	if !h.NotReadySince.IsZero() {
		return Ready{Due: Due{At: h.NotReadySince.Add(cfg.NodeLostAfter)}}
	}
	return Ready{}
}

// LostWhy says why ready node n is lost by what its cluster says of it at
// now (h), or "" if it is not.
func LostWhy(cfg Config, n domain.Node, h driver.NodeHealth, now time.Time) string {
	cfg.defaults()
	switch {
	case h.Lost != "":
		return fmt.Sprintf("node %s was lost: %s", n.Name, h.Lost)
	case h.Gone:
		return fmt.Sprintf("node %s was lost: its Node object was deleted from the cluster, not by sparecap", n.Name)
	case !h.NotReadySince.IsZero() && now.Sub(h.NotReadySince) >= cfg.NodeLostAfter:
		return fmt.Sprintf("node %s was lost: it has not been Ready since %s (%s, longer than %s)", n.Name,
			h.NotReadySince.UTC().Format(time.RFC3339), now.Sub(h.NotReadySince).Round(time.Second), cfg.NodeLostAfter)
	}
	return ""
}

// Attention says whether ready node n needs its step now by what its
// cluster says of it (h): lost, marked with another class, or not Ready
// (to be due when it would be lost). The backstop sweep asks it of every
// ready node and hands the executor only those.
func Attention(n domain.Node, h driver.NodeHealth) bool {
	return h.Lost != "" || h.Gone || !h.NotReadySince.IsZero() || (h.Class != "" && h.Class != n.Class)
}
