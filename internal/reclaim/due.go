package reclaim

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/steprun"
)

// The worker pools of node steps (steprun.Pool).
const (
	// Workers run every step but those below: provisioning, drains whose
	// notice is out, removals, cleanup.
	Workers steprun.Pool = iota
	// Notices run the drains whose notice is not out yet: a pool of their
	// own, so a burst's notices never wait behind other steps.
	Notices
)

// TagDrain tags the drains waiting for their work: a driver that sees
// work go pokes them (steprun.Runner.Poke).
const TagDrain = "drain"

// Due is when node n, as stored at now, is next due for a reclaim step:
// a drain polls its work every Config.Poll and is due by its deadline,
// however its notice fails (the deadline step asks nothing of the
// cluster); a removal whose wipe is not done polls it. Other states are
// not reclaim's: zero.
func (m *Machine) Due(n domain.Node, now time.Time) steprun.Due {
	switch n.State {
	case domain.NodeDraining:
		d := steprun.Poll(now, m.cfg.Poll, n.Deadline, Workers)
		d.Tag = TagDrain
		if !n.Notified {
			d.Pool = Notices
		}
		return d
	case domain.NodeRemoving:
		return steprun.Poll(now, m.cfg.Poll, time.Time{}, Workers)
	}
	return steprun.Due{}
}
