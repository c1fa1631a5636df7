package reclaim

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/steprun"
)

// Config of a Machine. Zero values take the defaults.
type Config struct {
	// CleanupBudget bounds the attempt to delete a removed node's objects
	// from its cluster before its machine is handed on (default 1 s): a
	// cluster whose API is slow or down gets its cleanup retried in the
	// background instead.
	CleanupBudget time.Duration
	// NodeLostAfter: a ready node the cluster reports not Ready this long
	// is lost (default 5 minutes). A node the cluster no longer has is
	// lost at once.
	NodeLostAfter time.Duration
	// Poll is how often a drain looks at its work again, and a removal at
	// its wipe, when nothing pokes them (default 1 s).
	Poll time.Duration
}

func (c *Config) defaults() {
	if c.CleanupBudget <= 0 {
		c.CleanupBudget = time.Second
	}
	if c.NodeLostAfter <= 0 {
		c.NodeLostAfter = 5 * time.Minute
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
}

// Machine is the reclaim step machine of one controller (see the package
// doc): it moves draining and removing nodes on, cleans up after removed
// ones and finds lost ones.
type Machine struct {
	port     Port
	cluster  driver.ClusterDriver
	machines driver.MachineProvider
	clock    clock.Clock
	cfg      Config
	log      *slog.Logger
	// saved holds the draining nodes whose checkpoint within the notice
	// is recorded (noteCheckpoint), so it is written once.
	saved sync.Map
}

// New returns the machine the controller drives through port.
func New(port Port, cluster driver.ClusterDriver, machines driver.MachineProvider, clk clock.Clock, cfg Config, log *slog.Logger) *Machine {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Machine{port: port, cluster: cluster, machines: machines, clock: clk, cfg: cfg, log: log}
}

// Config returns the effective configuration.
func (m *Machine) Config() Config { return m.cfg }

// Step moves node n, draining or removing, one step on and returns when
// it is next due (Due). n is the node as stored, read by the caller just
// before: a node is read once per step.
func (m *Machine) Step(ctx context.Context, n domain.Node) (steprun.Due, error) {
	var err error
	switch n.State {
	case domain.NodeDraining:
		n, err = m.drainStep(ctx, n)
	case domain.NodeRemoving:
		n, err = m.Remove(ctx, n)
	default:
		return steprun.Due{}, nil // moved on: nothing of reclaim's to do
	}
	due := m.Due(n, m.clock.Now())
	if err != nil {
		return due, fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
	}
	return due, nil
}

// until returns ctx cancelled once the machine's clock reaches t (at once
// if it has).
func (m *Machine) until(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	d := t.Sub(m.clock.Now())
	if d <= 0 {
		cancel()
		return ctx, cancel
	}
	ch := m.clock.After(d)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
