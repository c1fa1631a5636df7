package lifecycle

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Config of the steps. Zero values take the defaults.
type Config struct {
	// CleanupBudget bounds the attempt to delete a removed node's objects
	// from its cluster before its machine is handed on (default 1 s): a
	// cluster whose API is slow or down gets its cleanup retried in the
	// background instead.
	CleanupBudget time.Duration
	// NodeLostAfter: a ready node its cluster reports not Ready this long
	// is lost (default 5 minutes). A node the cluster no longer has is
	// lost at once.
	NodeLostAfter time.Duration
	// RegisterTimeout: a node not Ready this long after its provisioning
	// started goes back and is replaced (default 15 minutes).
	RegisterTimeout time.Duration
	// MaxFailures: registration failures in a row that take a machine out
	// of service (default 3).
	MaxFailures int
	// Poll is how often a step looks again at what its platform cannot
	// tell it (Facts.Tells, Facts.ProviderTells false): a drain's work, a
	// machine being prepared or wiped, a node registering (default 1 s).
	Poll time.Duration
}

func (c *Config) defaults() {
	if c.CleanupBudget <= 0 {
		c.CleanupBudget = time.Second
	}
	if c.NodeLostAfter <= 0 {
		c.NodeLostAfter = 5 * time.Minute
	}
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = 15 * time.Minute
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 3
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
}

// Step is one round of a node's step: a pure function of cfg and in (no
// I/O, no clock, no randomness). Its Ready says what to write, which
// driver calls to make and when the node is due next; see Ready for the
// order the executor applies it in.
func Step(cfg Config, in Input) Ready {
	cfg.defaults()
	if in.Cleanup {
		return cleanupStep(cfg, in)
	}
	switch in.Node.State {
	case domain.NodePending:
		return startStep(in)
	case domain.NodeProvisioning:
		return provisionStep(cfg, in)
	case domain.NodeReady:
		return readyStep(cfg, in)
	case domain.NodeDraining:
		return drainStep(cfg, in)
	case domain.NodeRemoving:
		return removeStep(cfg, in)
	}
	return Ready{} // removed, or gone: nothing left to do
}

// write returns the node to write: a copy of in's node, to be changed.
func write(in Input) *domain.Node {
	n := in.Node
	return &n
}

// failed ends a turn that failed with err, due as due says.
func failed(due Due, err error) Ready { return Ready{Due: due, Err: err} }

// withCourtesies adds cs to r's failed courtesies.
func withCourtesies(r Ready, cs []Courtesy) Ready {
	if len(cs) > 0 {
		r.Courtesies = append(cs, r.Courtesies...)
	}
	return r
}
