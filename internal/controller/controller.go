package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/store"
)

// Config of a controller. Zero values take the defaults.
type Config struct {
	// DrainWindow is the bounded notice (default 5 minutes).
	DrainWindow time.Duration
	// MinLease, if set, is the minimum lease of a machine's pool
	// (allocator.Config.MinLease).
	MinLease func(*domain.Machine) time.Duration
	// Cooldown keeps a machine released by a standard node out of
	// preemptible lending for a while, so capacity that standard demand just
	// gave back is not lent and reclaimed again at once (default 30s).
	// Negative disables it.
	Cooldown time.Duration
	// EventRetention is how long lifecycle events are kept (default 72h).
	EventRetention time.Duration
	// Interval between passes of the loop when nothing wakes it earlier,
	// in clock time (default 1s); a node's turn that waits for what its
	// platform cannot tell looks again this often.
	Interval time.Duration
	// Workers is how many node steps run at once (default 256). Steps wait
	// on their cluster's API, so this bounds concurrent API calls, not CPU.
	// It is also how many ready transitions can share a commit: with 64,
	// a million GPUs came up 14 s after the last create, with 256 in 8 s
	// (docs/perf.md).
	Workers int
	// NoticeWorkers is how many steps delivering a drain's notice run at
	// once (default 1024), a pool of their own that never waits behind the
	// other steps. It is large because a burst's notices are all due at
	// T+0 and each mostly waits on its cluster's API, which the driver
	// rate-limits per cluster: with 64, a 711-node burst on the 96k-GPU
	// benchmark needed 1.8 s for its notices, with 1024 1.0 s.
	NoticeWorkers int
	// NodeLostAfter: a ready node whose Node object stays NotReady this
	// long is lost: billing stops, its machine is taken back and the node
	// replaced (default 5 minutes). A Node object deleted behind sparecap's
	// back is lost at once.
	NodeLostAfter time.Duration
	// RegisterTimeout: a node that has not registered Ready this long
	// after provisioning started goes back and is replaced (default 15
	// minutes). Its machine is taken out of service after MaxFailures
	// such timeouts in a row.
	RegisterTimeout time.Duration
	// CleanupBudget bounds the attempt to delete a removed node's objects
	// from its cluster before its machine is handed on (default 1 s): a
	// cluster whose API is slow or down gets its cleanup retried in the
	// background instead.
	CleanupBudget time.Duration
	// Instant: the drivers answer at once (the simulated fleet on a
	// virtual clock), so driver calls are not cut off by timers.
	Instant bool
	// Random is the source of the controller's retry jitter and of the
	// identifiers it makes (default: seeded from the system's entropy); a
	// test that seeds it replays its run.
	Random *random.Source
	// SweepEvery is how often ready nodes are checked against their Node
	// objects when no watch reported a change and no NotReady node is
	// due (default 1 minute): the backstop for a change no watch saw.
	SweepEvery time.Duration
	// ConvertEvery is how soon after a conversion a node may convert
	// again (default DefaultConvertEvery): each conversion writes a usage
	// record and an event, so a tenant flipping a node cannot grow the
	// store faster than this.
	ConvertEvery time.Duration
}

// DefaultConvertEvery is Config.ConvertEvery's default.
const DefaultConvertEvery = time.Minute

// MaxFailures is how many registration timeouts in a row take a machine
// out of service.
const MaxFailures = 3

func (c *Config) defaults() {
	if c.DrainWindow <= 0 {
		c.DrainWindow = domain.DefaultDrainWindow
	}
	if c.Cooldown == 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.EventRetention <= 0 {
		c.EventRetention = domain.DefaultEventRetention
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 256
	}
	if c.NoticeWorkers <= 0 {
		c.NoticeWorkers = 1024
	}
	if c.NodeLostAfter <= 0 {
		c.NodeLostAfter = 5 * time.Minute
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = time.Minute
	}
	if c.ConvertEvery <= 0 {
		c.ConvertEvery = DefaultConvertEvery
	}
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = 15 * time.Minute
	}
	if c.CleanupBudget <= 0 {
		c.CleanupBudget = time.Second
	}
	if c.Random == nil {
		c.Random = random.FromEntropy()
	}
}

// Controller plans and applies. Create it with New.
type Controller struct {
	store store.Store
	// parts plans what changed: the partitions whose inputs changed since
	// they were last settled (fed the in-memory copy's commits).
	parts    allocator.Faceted
	pools    poolSignals // what parts knows of pools' prices (pools.go)
	cluster  driver.ClusterDriver
	machines driver.MachineProvider
	clock    clock.Clock
	cfg      Config
	log      *slog.Logger
	// NewID makes identifiers; tests replace it for stable IDs.
	NewID func(prefix string) string
	// Observer, if set, is told about each step the controller takes; the
	// demo narrates from it and metrics count with it. It is called one
	// observation at a time, with the plan lock held: it must be quick and
	// must not call the controller. Observers combines several.
	Observer func(Observation)
	// OnClusterGone, if set, is called once a deleted cluster's last node
	// is removed and the cluster is gone (the server stops that cluster's
	// Kubernetes watch).
	OnClusterGone func(clusterID string)

	// exec runs the node turns (package lifecycle): when each is due, its
	// steps' writes, driver calls and answers.
	exec *lifecycle.Executor

	mu planLock // serializes plan + commit
	// checkParts, set by tests, is given each plan the loop makes, with
	// the token naming the partitions it planned.
	checkParts func(pl allocator.Plan, tok allocator.Token, now time.Time, cfg allocator.Config)
	// tq holds transitions waiting for the next holder of mu to commit
	// them together (see transition).
	tq batchQueue[*pendingTransition]
	// cq holds creates waiting for the next holder of mu (see
	// CreateCluster).
	cq batchQueue[*createReq]
	// access holds what drivers learned of clusters' permissions, for
	// the next pass to record (see RecordAccess).
	access batchQueue[driver.AccessReport]
	// notes are what drivers asked to record as events (RecordNote).
	notes batchQueue[driver.NodeNote]
	kick  chan struct{}
	// moves wakes the loop to replan after node steps moved nodes, at most
	// every replanGap (see Run).
	moves chan struct{}
	// kicked and movedSig are set before a kick or a move is sent, and
	// cleared by the loop once it woke; waitUntil (Unix ns, 0: awake) and
	// waitGap say what the loop waits for (see Due).
	kicked, movedSig, waitGap atomic.Bool
	waitUntil                 atomic.Int64
	changedMu                 sync.Mutex
	changed                   chan struct{}
	nextPrune, nextArchive    time.Time    // see pruneIfDue
	moved                     atomic.Int64 // node transitions so far
	inFlight                  atomic.Pointer[inFlightNodes]

	// lastResync is when the executor was last handed every node in
	// flight (see pass).
	lastResync time.Time
	// lastSweep is when ready nodes were last checked for loss;
	// sweepNow asks the next pass to check them at once.
	lastSweep time.Time
	sweepNow  atomic.Bool
	// lastClaims is when the bookings' claims were last worked out;
	// claimNow asks the next pass to work them out at once (a booking
	// made, moved or cancelled).
	lastClaims, nextClaims time.Time
	claimNow               atomic.Bool
	// announced is what nodes were shown of their coming notice.
	announced announcer
}

// Observation is a step the controller took on a node (see
// lifecycle.Observation).
type Observation = lifecycle.Observation

// ObservationKind says what an Observation reports.
type ObservationKind = lifecycle.ObservationKind

// The kinds of observation (see lifecycle).
const (
	KindEvent           = lifecycle.KindEvent
	KindDrainStarted    = lifecycle.KindDrainStarted
	KindNoticeDelivered = lifecycle.KindNoticeDelivered
	KindDrainFinished   = lifecycle.KindDrainFinished
)

// Observers returns an Observer that calls each non-nil f in turn, so
// several consumers (a narrator, metrics) can share Controller.Observer.
func Observers(fs ...func(Observation)) func(Observation) {
	var live []func(Observation)
	for _, f := range fs {
		if f != nil {
			live = append(live, f)
		}
	}
	return func(o Observation) {
		for _, f := range live {
			f(o)
		}
	}
}

// New returns a controller.
func New(st store.Store, cd driver.ClusterDriver, mp driver.MachineProvider, clk clock.Clock, cfg Config, log *slog.Logger) *Controller {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		store: st, cluster: cd, machines: mp, clock: clk, cfg: cfg, log: log,
		NewID:   cfg.Random.ID,
		kick:    make(chan struct{}, 1),
		moves:   make(chan struct{}, 1),
		changed: make(chan struct{}),
		mu:      newPlanLock(),
	}
	c.wirePools()
	c.exec = lifecycle.NewExecutor(world{c}, cd, mp, lifecycle.ExecutorConfig{
		Steps: lifecycle.Config{CleanupBudget: cfg.CleanupBudget, NodeLostAfter: cfg.NodeLostAfter, Poll: cfg.Interval,
			RegisterTimeout: cfg.RegisterTimeout, MaxFailures: MaxFailures},
		Clock: clk, Random: cfg.Random, Workers: cfg.Workers, NoticeWorkers: cfg.NoticeWorkers, Instant: cfg.Instant, Log: log})
	// What a driver sees of a node wakes that node's turn alone; it also
	// reports what it learns of a cluster's permissions, and notes.
	hooks := driver.Hooks{Wake: c.wake, Access: c.RecordAccess, Note: c.RecordNote}
	cd.SetHooks(hooks)
	if hp, ok := mp.(interface{ SetHooks(driver.Hooks) }); ok && any(mp) != any(cd) {
		hp.SetHooks(hooks)
	}
	return c
}

// Config returns the effective configuration.
func (c *Controller) Config() Config { return c.cfg }

// Changed returns a channel closed at the next commit that adds lifecycle
// events. Event streams wait on it.
func (c *Controller) Changed() <-chan struct{} {
	c.changedMu.Lock()
	defer c.changedMu.Unlock()
	return c.changed
}

// NotifyEvents wakes the event streams waiting on Changed: a follower
// server calls it when the leader committed events.
func (c *Controller) NotifyEvents() { c.notify() }

func (c *Controller) notify() {
	c.changedMu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.changedMu.Unlock()
}

// SweepSoon asks the loop to check ready nodes against their clusters'
// Node objects now.
func (c *Controller) SweepSoon() {
	c.sweepNow.Store(true)
	c.Kick()
}

// Kick asks the loop to reconcile now.
func (c *Controller) Kick() {
	c.kicked.Store(true)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// movedNodes asks the loop to replan soon: a node step moved a node (it became
// ready or left, or freed a machine), which changes its cluster's state
// and may free capacity.
func (c *Controller) movedNodes() {
	c.movedSig.Store(true)
	select {
	case c.moves <- struct{}{}:
	default:
	}
}

// ShortfallError refuses a request whose standard capacity cannot be found.
type ShortfallError struct {
	allocator.Shortfall
	// Because, if set, says what else holds the capacity (a booking).
	Because string
}

func (e *ShortfallError) Error() string {
	if e.Because != "" {
		return "insufficient capacity: " + e.Shortfall.Error() + "; " + e.Because
	}
	return "insufficient capacity: " + e.Shortfall.Error()
}

// ErrDeleting refuses changes to a cluster being deleted.
var ErrDeleting = errors.New("cluster is being deleted")

func (c *Controller) snapshot(ctx context.Context) (allocator.Snapshot, error) {
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return allocator.Snapshot{}, fmt.Errorf("read snapshot: %w", err)
	}
	return allocator.Snapshot(s), nil
}

// planConfig is the allocator's configuration of one plan.
func (c *Controller) planConfig() allocator.Config {
	return allocator.Config{DrainWindow: c.cfg.DrainWindow, Cooldown: max(c.cfg.Cooldown, 0), Load: c.load(), MinLease: c.cfg.MinLease}
}

// load is the allocator's Config.Load for one plan: what the cluster's
// driver knows of a node's work, read from its watches (never waited
// for), asked once per node so the plan sees one answer.
func (c *Controller) load() func(*domain.Node) domain.NodeLoad {
	seen := map[string]domain.NodeLoad{}
	return func(n *domain.Node) domain.NodeLoad {
		l, ok := seen[n.ID]
		if !ok {
			l = c.cluster.Load(n.ClusterID, n.Name)
			seen[n.ID] = l
		}
		return l
	}
}

func (c *Controller) observe(obs []Observation) {
	if c.Observer == nil {
		return
	}
	for _, o := range obs {
		c.Observer(o)
	}
}

// observeLocked reports observations made outside the plan lock, taking
// it so that Observer calls stay serialized.
func (c *Controller) observeLocked(obs ...Observation) {
	if c.Observer == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(obs)
}
