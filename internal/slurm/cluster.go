// Package slurm drives tenants' Slurm clusters (22.05 and later) with
// Slurm's own client commands: it implements driver.ClusterDriver against
// each attached cluster's slurmctld (Cluster), and routes every call to
// the right cluster, or to the next driver for clusters that are not Slurm
// (Router).
//
// Slurm 22.05's REST API cannot drain, requeue, create or delete nodes, so
// the driver runs scontrol, squeue, scancel and sinfo, each call bounded
// by a timeout, a few at a time per cluster, and retried while slurmctld
// does not answer. It reads the cluster with one `sinfo --json` and one
// `squeue --json` per poll (Options.PollEvery), and between polls from
// that snapshot; the poll also keeps the promises Slurm has no place for:
// a noticed job that exits is requeued exactly once, the requeue hold is
// released, and a job still running at its deadline minus KillWait is
// requeued (or, if it may not be, cancelled) so it is gone by the
// deadline. Those promises are written on the job itself (its
// AdminComment), so a restarted sparecap keeps them.
//
// The mapping: a node is a dynamic node named as sparecap names it, with
// the features "sparecap" and its class; a unit of work is a job with
// work on the node (a multi-node job is one unit, noticed once as a
// whole); marks are a drain with a reason starting "sparecap:" and the
// deadline in the node's Extra field (JSON); a notice is SIGTERM to the
// job's batch shell and steps; a tenant's notice is the node's Extra and
// the job's AdminComment (Slurm has no events).
package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Defaults for Options.
const (
	DefaultPollEvery = time.Second
	DefaultTimeout   = 10 * time.Second
	DefaultInFlight  = 8
	DefaultRetries   = 2
	// DefaultProbeFailures: consecutive failed probes of a node's slurmd
	// (Options.ProbeEvery) after which the driver sets it DOWN (its jobs
	// are requeued now) and reports it lost.
	DefaultProbeFailures = 3
)

// Options configure the driver of every Slurm cluster.
type Options struct {
	// PollEvery is how often the cluster is read (default 1 s).
	PollEvery time.Duration
	// Timeout bounds one command (default 10 s).
	Timeout time.Duration
	// InFlight bounds the commands running at once against one cluster
	// (default 8).
	InFlight int
	// Retries: how often a command is tried again when slurmctld did not
	// answer (default 2).
	Retries int
	// ProbeEvery: how often sparecap's host connects to each node's
	// slurmd to find one that stopped answering before slurmctld does
	// (0, the default: never; each probe costs a line in the slurmd's
	// log). Without it a node is found lost when slurmctld marks it not
	// responding.
	ProbeEvery time.Duration
	// ProbeFailures: see DefaultProbeFailures.
	ProbeFailures int
	// Bin is the directory of the Slurm commands (default: PATH).
	Bin string
	// Dir holds each cluster's slurm.conf, private to sparecap (default:
	// a new directory under the system's temporary one).
	Dir   string
	Clock clock.Clock
	Log   *slog.Logger
	Hooks driver.Hooks
}

func (o *Options) defaults() {
	o.PollEvery = cmp.Or(o.PollEvery, DefaultPollEvery)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.InFlight = cmp.Or(o.InFlight, DefaultInFlight)
	o.Retries = cmp.Or(o.Retries, DefaultRetries)
	o.ProbeFailures = cmp.Or(o.ProbeFailures, DefaultProbeFailures)
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Cluster is the driver of one Slurm cluster.
type Cluster struct {
	id   string
	opts Options
	run  *runner
	// dir holds this cluster's slurm.conf; removed by Close.
	dir string
	// killWait is the cluster's KillWait (SIGTERM to SIGKILL on a
	// requeue), read at start.
	killWait time.Duration

	hooks atomic.Pointer[driver.Hooks]
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	snap *snapshot
	// refreshing is closed when the refresh in progress ends.
	refreshing chan struct{}
	tend       tendState
}

// NewCluster starts the driver of the cluster whose slurm.conf is conf:
// it checks that slurmctld answers, reads KillWait and starts the poll.
func NewCluster(ctx context.Context, id string, conf []byte, opts Options) (*Cluster, error) {
	opts.defaults()
	if err := CheckConf(conf); err != nil {
		return nil, err
	}
	base := opts.Dir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "slurm-"+id+"-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{id: id, opts: opts, dir: dir, stop: make(chan struct{}), done: make(chan struct{}),
		run: &runner{conf: path, timeout: opts.Timeout, retries: opts.Retries, slots: make(chan struct{}, opts.InFlight),
			bin: opts.Bin, sleepFor: opts.Clock.After}}
	c.tend.init()
	h := opts.Hooks
	c.hooks.Store(&h)
	if c.killWait, err = c.readKillWait(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go c.loop()
	return c, nil
}

// CheckConf refuses what cannot be a slurm.conf for the client commands.
func CheckConf(conf []byte) error {
	s := string(conf)
	if strings.TrimSpace(s) == "" {
		return errors.New("the slurm.conf is empty")
	}
	for _, line := range strings.Split(s, "\n") {
		k, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if strings.EqualFold(k, "SlurmctldHost") || strings.EqualFold(k, "ControlMachine") {
			return nil
		}
	}
	return errors.New("the slurm.conf names no SlurmctldHost: the client commands could not find slurmctld")
}

// readKillWait asks slurmctld for its configuration (and so checks that
// it answers).
func (c *Cluster) readKillWait(ctx context.Context) (time.Duration, error) {
	out, err := c.run.run(ctx, "scontrol", "show", "config")
	if err != nil {
		return 0, fmt.Errorf("cluster %s: slurmctld did not answer: %w", c.id, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "KillWait" {
			v = strings.Fields(v)[0]
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return time.Duration(n) * time.Second, nil
			}
		}
	}
	return 30 * time.Second, nil // Slurm's default
}

// Close stops the poll and removes the cluster's slurm.conf copy.
func (c *Cluster) Close() {
	close(c.stop)
	<-c.done
	os.RemoveAll(c.dir)
}

// SetHooks sets how the driver tells the controller what it sees.
func (c *Cluster) SetHooks(h driver.Hooks) { c.hooks.Store(&h) }

func (c *Cluster) hook() driver.Hooks { return *c.hooks.Load() }

// KillWait is the cluster's KillWait.
func (c *Cluster) KillWait() time.Duration { return c.killWait }

func (c *Cluster) check(clusterID string) error {
	if clusterID != c.id {
		return fmt.Errorf("the driver of Slurm cluster %s was asked about cluster %s", c.id, clusterID)
	}
	return nil
}

func notFound(what string) error { return fmt.Errorf("%s: %w", what, domain.ErrNotFound) }

var _ driver.ClusterDriver = (*Cluster)(nil)

// ID is the cluster's ID.
func (c *Cluster) ID() string { return c.id }
