// Package slurm drives tenants' Slurm clusters (22.05 and later) with
// Slurm's own client commands: it implements driver.ClusterDriver against
// each attached cluster's slurmctld (Cluster), built from the cluster's
// slurm.conf as the Slurm platform of driver.Router (NewPlatform).
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
// The commands never read the tenant's slurm.conf: they get a copy of the
// settings they need (ParseConf), and an environment of their own.
//
// The mapping: a node is a dynamic node named as sparecap names it, with
// the features "sparecap", its class and its cluster's (ClusterFeature:
// the driver acts on no node without it); a unit of work is a job with
// work on the node (a multi-node job is one unit, noticed once as a
// whole); marks are a drain with a reason starting "sparecap:" and the
// deadline in the node's Extra field (JSON); a notice is SIGTERM to the
// job's srun steps, or to its batch shell when it has none (srun itself
// kills its tasks on SIGTERM); a tenant's notice is the node's Extra and
// the job's AdminComment (Slurm has no events).
package slurm

import (
	"cmp"
	"context"
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
	// Bin is the directory of the Slurm commands (default: the server's
	// PATH finds them).
	Bin string
	// Dir holds the commands' copy of each cluster's slurm.conf (see
	// ParseConf), each in a directory of its own, owner only (default:
	// the system's temporary directory; the server uses
	// <data-dir>/slurm, which it clears when it starts).
	Dir string
	// AuthSocketDir is the directory under which a slurm.conf's munge
	// socket must be (default DefaultAuthSocketDir): the operator keeps
	// each tenant's munged there, and a file naming another socket would
	// sign with another key.
	AuthSocketDir string
	Clock         clock.Clock
	Log           *slog.Logger
	Hooks         driver.Hooks
}

func (o *Options) defaults() {
	o.PollEvery = cmp.Or(o.PollEvery, DefaultPollEvery)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.InFlight = cmp.Or(o.InFlight, DefaultInFlight)
	o.Retries = cmp.Or(o.Retries, DefaultRetries)
	o.ProbeFailures = cmp.Or(o.ProbeFailures, DefaultProbeFailures)
	o.AuthSocketDir = cmp.Or(o.AuthSocketDir, DefaultAuthSocketDir)
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
	// requeue), and slurmdPort the port its slurmds listen on, read at
	// start.
	killWait   time.Duration
	slurmdPort int

	hooks atomic.Pointer[driver.Hooks]
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	snap *snapshot
	// before: the nodes from before cluster features slurmctld had at the
	// first poll (see own); nil until then. added: the nodes AddNode gave
	// the cluster's feature.
	before, added map[string]bool
	// refreshing is closed when the refresh in progress ends.
	refreshing chan struct{}
	tend       tendState
}

// NewCluster starts the driver of the cluster whose slurm.conf is conf:
// it checks the file (ParseConf), writes the commands' copy, checks that
// slurmctld answers, reads its KillWait and SlurmdPort, and starts the
// poll.
func NewCluster(ctx context.Context, id string, conf []byte, opts Options) (*Cluster, error) {
	c, err := newCluster(ctx, id, conf, opts)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	return c, nil
}

func newCluster(ctx context.Context, id string, conf []byte, opts Options) (*Cluster, error) {
	opts.defaults()
	parsed, err := ParseConf(conf, opts.AuthSocketDir)
	if err != nil {
		return nil, err
	}
	dir, path, err := writeCopy(opts.Dir, id, parsed.Copy())
	if err != nil {
		return nil, err
	}
	c := &Cluster{id: id, opts: opts, dir: dir, stop: make(chan struct{}), done: make(chan struct{}), added: map[string]bool{},
		run: &runner{conf: path, timeout: opts.Timeout, retries: opts.Retries, slots: make(chan struct{}, opts.InFlight),
			bin: opts.Bin, sleepFor: opts.Clock.After}}
	c.tend.init()
	h := opts.Hooks
	c.hooks.Store(&h)
	if err := c.readConfig(ctx, parsed.SlurmdPort); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go c.loop()
	return c, nil
}

// writeCopy writes the commands' slurm.conf into a new directory of its
// own under base, owner only.
func writeCopy(base, id string, conf []byte) (dir, path string, err error) {
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", "", fmt.Errorf("the directory of the slurm.conf copies: %w", err)
	}
	if dir, err = os.MkdirTemp(base, "slurm-"+id+"-"); err != nil {
		return "", "", fmt.Errorf("the directory of the slurm.conf copies: %w", err)
	}
	path = filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("write the slurm.conf copy: %w", err)
	}
	return dir, path, nil
}

// defaultSlurmdPort is SlurmdPort's default.
const defaultSlurmdPort = 6818

// readConfig asks slurmctld for its configuration (and so checks that it
// answers): its KillWait, and the SlurmdPort its slurmds listen on (the
// file's, or Slurm's default, if it does not say).
func (c *Cluster) readConfig(ctx context.Context, confPort int) error {
	out, err := c.run.run(ctx, "scontrol", "show", "config")
	if err != nil {
		return fmt.Errorf("slurmctld did not answer: %w", err)
	}
	c.killWait = 30 * time.Second // Slurm's default
	c.slurmdPort = cmp.Or(confPort, defaultSlurmdPort)
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		f := strings.Fields(v)
		if !ok || len(f) == 0 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		switch {
		case err != nil:
		case strings.TrimSpace(k) == "KillWait":
			c.killWait = time.Duration(n) * time.Second
		case strings.TrimSpace(k) == "SlurmdPort" && n > 0 && n < 65536:
			c.slurmdPort = n
		}
	}
	return nil
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
