package controller

import (
	"context"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// announceTimeout bounds one node's announcement: a tenant's API that is
// down delays the next node's by that much at most, and nothing else.
const announceTimeout = 10 * time.Second

// announcement is a node's coming notice, as its cluster's driver shows
// it to the node's work (driver.Announcer); a zero at: none.
type announcement struct {
	cluster, node string
	at            time.Time
}

// announcer keeps what each node was last shown, so that a claim that
// goes is taken off its node, and runs one round at a time.
type announcer struct {
	mu      sync.Mutex
	shown   map[[2]string]time.Time
	running bool
}

// announce shows every claimed node's coming notice to its work, and
// takes it off the nodes shown one whose claim went, in the background
// (a courtesy: the notice itself comes at its time whatever this does).
// Every round shows the claimed nodes again: a pod that came since gets
// it. A round still running when the next is due is left to finish.
func (c *Controller) announce(ctx context.Context, nodes []domain.Node, want map[string]claim) {
	var round []announcement
	claimed := map[[2]string]bool{}
	for _, n := range nodes {
		if cl, ok := want[n.MachineID]; ok && n.State == domain.NodeReady {
			round = append(round, announcement{n.ClusterID, n.Name, cl.at})
			claimed[[2]string{n.ClusterID, n.Name}] = true
		}
	}
	a := &c.announced
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		return
	}
	for k := range a.shown {
		if !claimed[k] {
			round = append(round, announcement{k[0], k[1], time.Time{}})
		}
	}
	if len(round) == 0 {
		return
	}
	a.running = true
	go c.announceRound(context.WithoutCancel(ctx), round)
}

// announceRound makes each announcement of round through the cluster's
// driver, one at a time, each bounded by announceTimeout; failures are
// logged and tried again next round.
func (c *Controller) announceRound(ctx context.Context, round []announcement) {
	a := &c.announced
	defer func() {
		a.mu.Lock()
		a.running = false
		a.mu.Unlock()
	}()
	for _, x := range round {
		actx, cancel := context.WithTimeout(ctx, announceTimeout)
		ok, err := driver.Announce(actx, c.cluster, x.cluster, x.node, x.at)
		cancel()
		if err != nil {
			c.log.Warn("cannot show a node's work its coming notice; tried again next round", "cluster", x.cluster, "node", x.node, "err", err)
			continue
		}
		a.mu.Lock()
		switch {
		case a.shown == nil && ok && !x.at.IsZero():
			a.shown = map[[2]string]time.Time{{x.cluster, x.node}: x.at}
		case ok && !x.at.IsZero():
			a.shown[[2]string{x.cluster, x.node}] = x.at
		default:
			delete(a.shown, [2]string{x.cluster, x.node})
		}
		a.mu.Unlock()
	}
}

// any reports whether some node is shown a coming notice.
func (a *announcer) any() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.shown) > 0
}
