package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/steprun"
)

// Port is how provisioning reaches the controller that drives it.
type Port interface {
	// Machine reads a machine (from the leader's memory).
	Machine(ctx context.Context, id string) (domain.Machine, error)
	// ClusterType is the type of cluster id.
	ClusterType(ctx context.Context, id string) (domain.ClusterType, error)
	// Start moves pending node id to provisioning, under the plan lock, if
	// its machine serves no other active node (domain.ErrStale if it does,
	// or if the node moved on).
	Start(ctx context.Context, id string) (domain.Node, error)
	// TransitionWithMachine applies change to node id if it is still in state from,
	// compare-and-set, in one transaction under the plan lock (see
	// reclaim.Port.Transition). change may read its machine in the same
	// transaction (machine): a machine it read is written with the node.
	TransitionWithMachine(ctx context.Context, id string, from domain.NodeState, change Change) (domain.Node, error)
}

// Change changes node n and, if it reads it, its machine (see
// Port.TransitionWithMachine), at now, and returns the events it posts.
type Change func(n *domain.Node, machine func() (*domain.Machine, error), now time.Time) ([]domain.Event, error)

// Remover takes a node given back through the removing step (reclaim).
type Remover interface {
	Remove(ctx context.Context, n domain.Node) (domain.Node, error)
}

// Config of a Provisioner. Zero values take the defaults.
type Config struct {
	// RegisterTimeout: a node not Ready this long after provisioning
	// started goes back and is replaced (default 15 minutes).
	RegisterTimeout time.Duration
	// MaxFailures: registration failures in a row that take a machine out
	// of service (default 3).
	MaxFailures int
	// Poll is how often a provisioning node is asked again (default 1 s).
	Poll time.Duration
	// LastErr is the error of node id's last failed step, if any (the
	// step runner's): a node that timed out while its cluster's API failed
	// does not count against its machine.
	LastErr func(id string) error
}

func (c *Config) defaults() {
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = 15 * time.Minute
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 3
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.LastErr == nil {
		c.LastErr = func(string) error { return nil }
	}
}

// Provisioner is the provisioning step machine of one controller.
type Provisioner struct {
	port      Port
	cluster   driver.ClusterDriver
	machines  driver.MachineProvider
	remover   Remover
	clock     clock.Clock
	cfg       Config
	log       *slog.Logger
	preparing preparing
}

// New returns the provisioner the controller drives through port.
func New(port Port, cluster driver.ClusterDriver, machines driver.MachineProvider, remover Remover, clk clock.Clock, cfg Config, log *slog.Logger) *Provisioner {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provisioner{port: port, cluster: cluster, machines: machines, remover: remover, clock: clk, cfg: cfg, log: log}
}

// Config returns the effective configuration.
func (p *Provisioner) Config() Config { return p.cfg }

// Step moves node n, pending or provisioning, one step on and returns
// when it is next due. n is the node as stored, read just before.
func (p *Provisioner) Step(ctx context.Context, n domain.Node) (steprun.Due, error) {
	var err error
	switch n.State {
	case domain.NodePending:
		n, err = p.start(ctx, n)
	case domain.NodeProvisioning:
		n, err = p.provision(ctx, n)
	default:
		return steprun.Due{}, nil
	}
	due := p.Due(n, p.clock.Now())
	if err != nil {
		return due, fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
	}
	return due, nil
}

// Due is when node n, as stored at now, is next due for a provisioning
// step: a provisioning node is asked every Config.Poll and is due by its
// registration deadline. A pending node waits for the removal that frees
// its machine to start it: zero.
func (p *Provisioner) Due(n domain.Node, now time.Time) steprun.Due {
	if n.State != domain.NodeProvisioning {
		return steprun.Due{}
	}
	return steprun.Poll(now, p.cfg.Poll, p.RegisterBy(n), reclaim.Workers)
}

// start starts a pending node whose machine has been vacated.
func (p *Provisioner) start(ctx context.Context, n domain.Node) (domain.Node, error) {
	started, err := p.port.Start(ctx, n.ID)
	if err != nil {
		return n, reclaim.IgnoreStale(err)
	}
	return started, nil
}

// provision asks the machine provider, then the cluster, and makes the
// node ready once the cluster has it Ready.
func (p *Provisioner) provision(ctx context.Context, n domain.Node) (domain.Node, error) {
	// The node is asked first, the registration deadline checked after: a
	// step that runs late (a busy controller) must not fail a node that
	// did register, nor count it against its machine.
	late := !p.clock.Now().Before(p.RegisterBy(n))
	m, err := p.port.Machine(ctx, n.MachineID)
	if err != nil {
		return n, fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	sp := driver.Spec(n)
	if t, err := p.port.ClusterType(ctx, n.ClusterID); err == nil {
		sp.Platform = t
	}
	done, err := p.machines.Prepare(ctx, m, sp)
	if err != nil {
		if late {
			return p.registrationFailed(ctx, n)
		}
		return n, &reclaim.ProviderError{Reason: domain.ReasonProvisionFailed, Err: fmt.Errorf("prepare machine %s: %w", m.ID, err)}
	}
	if p.preparing.started(n.ID, p.clock.Now()) {
		// The machine was first asked just now (the step queued behind
		// others, or a new leader took over): its window starts here.
		late = false
	}
	if !done {
		if late {
			return p.registrationFailed(ctx, n)
		}
		return n, nil
	}
	if err := p.cluster.AddNode(ctx, sp); err != nil {
		if late {
			return p.registrationFailed(ctx, n)
		}
		if errors.Is(err, driver.ErrNotReady) {
			return n, nil // not registered or not Ready yet: poll again
		}
		return n, &reclaim.ClusterError{Err: fmt.Errorf("add node: %w", err)}
	}
	return p.registered(ctx, n)
}

// registered makes node n ready: a node registered, so its machine's
// failures were not in a row.
func (p *Provisioner) registered(ctx context.Context, n domain.Node) (domain.Node, error) {
	ready, err := p.port.TransitionWithMachine(ctx, n.ID, domain.NodeProvisioning, func(n *domain.Node, machine func() (*domain.Machine, error), now time.Time) ([]domain.Event, error) {
		n.State, n.ReadyAt = domain.NodeReady, now
		// Most machines have no failures to forget: the leader's
		// in-memory copy says so without a read in the transaction.
		if m, err := p.port.Machine(ctx, n.MachineID); err == nil && m.Failures == 0 {
			return readyEvents(n), nil
		}
		m, err := machine()
		if err != nil {
			return nil, err
		}
		m.Failures = 0
		return readyEvents(n), nil
	})
	if err != nil {
		return n, reclaim.IgnoreStale(err)
	}
	p.preparing.forget(n.ID)
	return ready, nil
}

func readyEvents(n *domain.Node) []domain.Event {
	return []domain.Event{{Reason: domain.ReasonNodeAdded,
		Message: fmt.Sprintf("%s node %s (%d GPUs, machine %s) joined the cluster, labelled %s=%s", n.Class, n.Name, n.GPUs, n.MachineID, domain.LabelComputeClass, n.Class)}}
}
