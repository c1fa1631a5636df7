package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// Config of a controller. Zero values take the defaults.
type Config struct {
	// DrainWindow is the bounded notice (default 5 minutes).
	DrainWindow time.Duration
	// Cooldown keeps a machine released by a standard node out of
	// preemptible lending for a while, so capacity that standard demand just
	// gave back is not lent and reclaimed again at once (default 30s).
	// Negative disables it.
	Cooldown time.Duration
	// EventRetention is how long lifecycle events are kept (default 72h).
	EventRetention time.Duration
	// Interval between reconciles when nothing wakes the loop earlier, in
	// clock time (default 1s).
	Interval time.Duration
	// Workers is how many node steps run at once (default 64). Steps wait
	// on their cluster's API, so this bounds concurrent API calls, not CPU.
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
	// SweepEvery is how often ready nodes are checked against their Node
	// objects when no watch reported a change and no NotReady node is
	// due (default 1 minute): the backstop for a change no watch saw.
	SweepEvery time.Duration
}

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
		c.Workers = 64
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
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = 15 * time.Minute
	}
	if c.CleanupBudget <= 0 {
		c.CleanupBudget = time.Second
	}
}

// Controller plans and applies. Create it with New.
type Controller struct {
	store store.Store
	// planner keeps the allocator's indexes of the tables that did not
	// change since the last plan (the in-memory copy hands out the same
	// slices until a row changes).
	planner  allocator.Planner
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

	mu planLock // serializes plan + commit
	// settled is the last plan replan found nothing to commit in, and the
	// snapshot it was made from (under mu; see replan).
	settled *settledPlan
	// settledHits counts plans reused; checkSettled, set by tests, is
	// given each reused plan with the one planning afresh would make.
	settledHits  atomic.Int64
	checkSettled func(settled, fresh allocator.Plan, s allocator.Snapshot, now time.Time)
	// checkPlan, set by tests, is given each plan with the one made
	// without the planner's kept indexes.
	checkPlan func(got, fresh allocator.Plan)
	// tq holds transitions waiting for the next holder of mu to commit
	// them together (see transition).
	tq batchQueue[*pendingTransition]
	// cq holds creates waiting for the next holder of mu (see
	// CreateCluster).
	cq batchQueue[*createReq]
	// access holds what drivers learned of clusters' permissions, for
	// the next pass to record (see RecordAccess).
	access    batchQueue[driver.AccessReport]
	kick      chan struct{}
	changedMu sync.Mutex
	changed   chan struct{}
	lastPrune time.Time
	moved     atomic.Int64 // node transitions so far
	inFlight  atomic.Pointer[inFlightNodes]

	workers chan struct{} // a token per node step running
	// notices are the tokens of steps that deliver a drain's notice: a
	// pool of their own, so a burst's notices never wait behind
	// provisioning steps or drains already notified.
	notices chan struct{}
	steps   sync.WaitGroup // node steps running
	busyMu  sync.Mutex
	busy    map[string]bool // nodes whose step is running
	backoff backoff
	// preparing is when this process's first Prepare of each node in
	// provisioning was accepted: the registration window counts from it.
	preparing preparing
	// lastSweep is when ready nodes were last checked for loss;
	// sweepNow asks the next pass to check them at once.
	lastSweep time.Time
	sweepNow  atomic.Bool
	// lostDue is when the first NotReady node the last sweep saw reaches
	// NodeLostAfter (zero: none is NotReady).
	lostDue time.Time
}

// Observation is a step the controller took on a node. Kind says which:
// a lifecycle event it recorded (KindEvent: Reason and Message are set), or
// one of the reclaim steps that metrics time (Reason is empty). Each is
// reported once, after the transaction that recorded it committed.
type Observation struct {
	Time    time.Time
	Kind    ObservationKind
	Cluster string
	Node    string
	Reason  domain.EventReason
	Message string

	// Set on the reclaim steps (KindDrainStarted, KindNoticeDelivered,
	// KindDrainFinished): the node's class and GPUs, why it is drained, T+0
	// and its deadline.
	Class          domain.ComputeClass
	GPUs           int
	Cause          domain.DrainCause
	DrainStartedAt time.Time
	Deadline       time.Time
	// Outcome of a finished drain (KindDrainFinished); Time is then when
	// the node was drained (its DrainedAt).
	Outcome domain.DrainOutcome
}

// ObservationKind says what an Observation reports.
type ObservationKind string

const (
	// KindEvent: a lifecycle event was recorded.
	KindEvent ObservationKind = "event"
	// KindDrainStarted: a drain was committed (T+0): the node is draining
	// with its deadline. A reclaimed node that never became ready is removed
	// without a drain and is not reported.
	KindDrainStarted ObservationKind = "drain_started"
	// KindNoticeDelivered: every T+0 action (cordon, taint, annotate,
	// Kubernetes Event, SIGTERM) was delivered and Notified was stored, at
	// Time. Not reported when the deadline passed before the notice got
	// through.
	KindNoticeDelivered ObservationKind = "notice_delivered"
	// KindDrainFinished: the node left draining for removing, at Time, with
	// Outcome early or deadline.
	KindDrainFinished ObservationKind = "drain_finished"
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

// drainObservation describes a reclaim step of node n.
func drainObservation(kind ObservationKind, n domain.Node, at time.Time) Observation {
	return Observation{Time: at, Kind: kind, Cluster: n.ClusterID, Node: n.Name, Class: n.Class, GPUs: n.GPUs,
		Cause: n.DrainCause, DrainStartedAt: n.DrainStartedAt, Deadline: n.Deadline, Outcome: n.Outcome}
}

// New returns a controller.
func New(st store.Store, cd driver.ClusterDriver, mp driver.MachineProvider, clk clock.Clock, cfg Config, log *slog.Logger) *Controller {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		store: st, cluster: cd, machines: mp, clock: clk, cfg: cfg, log: log,
		NewID:   RandomID,
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		workers: make(chan struct{}, cfg.Workers),
		notices: make(chan struct{}, cfg.NoticeWorkers),
		busy:    map[string]bool{},
		mu:      newPlanLock(),
	}
	// The driver's watches wake the loop: work gone from a draining
	// node, a Node deleted or changing readiness; and it reports what it
	// learns of a cluster's permissions.
	cd.SetHooks(driver.Hooks{WorkGone: c.Kick, NodeChanged: c.SweepSoon, Access: c.RecordAccess})
	return c
}

// Config returns the effective configuration.
func (c *Controller) Config() Config { return c.cfg }

// RandomID returns prefix + 12 random hex digits.
func RandomID(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

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
// Node objects now (a node watch saw a managed Node deleted or change
// readiness).
func (c *Controller) SweepSoon() {
	c.sweepNow.Store(true)
	c.Kick()
}

// Kick asks the loop to reconcile now.
func (c *Controller) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// ShortfallError refuses a request whose standard capacity cannot be found.
type ShortfallError struct{ allocator.Shortfall }

func (e *ShortfallError) Error() string { return "insufficient capacity: " + e.Shortfall.Error() }

// ErrDeleting refuses changes to a cluster being deleted.
var ErrDeleting = errors.New("cluster is being deleted")

func (c *Controller) snapshot(ctx context.Context) (allocator.Snapshot, error) {
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return allocator.Snapshot{}, fmt.Errorf("read snapshot: %w", err)
	}
	return allocator.Snapshot(s), nil
}

func (c *Controller) plan(s allocator.Snapshot, now time.Time) allocator.Plan {
	cfg := allocator.Config{DrainWindow: c.cfg.DrainWindow, Cooldown: max(c.cfg.Cooldown, 0)}
	pl := c.planner.Compute(s, now, cfg)
	if c.checkPlan != nil {
		c.checkPlan(pl, allocator.Compute(s, now, cfg))
	}
	return pl
}

// CreateCluster creates a cluster if its standard capacity can be found,
// and commits the plan that provides it. It returns *ShortfallError
// otherwise, having changed nothing. The caller validates the request.
// also, if set, writes more in the same transaction (the cluster's
// kubeconfig, so no node is ever provisioned before it is attached).
// Concurrent creates are planned and committed together (see createReq),
// each with its own answer.
func (c *Controller) CreateCluster(ctx context.Context, cl domain.Cluster, also ...func(tx store.Tx, id string) error) (domain.Cluster, error) {
	r := &createReq{cl: cl, also: also, done: make(chan struct{})}
	c.cq.push(r)
	if c.lockUnless(ctx, r.done) {
		c.mu.Unlock()
	}
	<-r.done // answered by this holder or by another
	if r.err != nil {
		return domain.Cluster{}, r.err
	}
	c.Kick()
	return c.store.GetCluster(ctx, r.cl.ID)
}

// lock takes the plan lock for background work (a node's transition, a
// replan) and first answers the creates waiting for it: a client waits on
// its create, which must not queue behind every step of the fleet.
func (c *Controller) lock(ctx context.Context) {
	c.mu.Lock()
	c.flushCreates(ctx)
}

// lockUnless is lock unless done is closed first (the work the caller
// waits for was done by another holder); it reports whether it took the
// lock.
func (c *Controller) lockUnless(ctx context.Context, done <-chan struct{}) bool {
	if !c.mu.lockOr(done) {
		return false
	}
	c.flushCreates(ctx)
	return true
}

// planLock is the plan lock: a mutex (a channel of one token, so its
// waiters queue in order) that a waiter can stop waiting for. Creates and
// transitions queue their work and wait for the lock; whoever holds it
// does every queued item, and a waiter whose item is done leaves the
// queue (lockOr) rather than taking the lock only to find nothing to do:
// a busy fleet's thousands of such empty turns were most of the wait of
// a create.
type planLock struct{ token chan struct{} }

func newPlanLock() planLock { return planLock{token: make(chan struct{}, 1)} }

func (l planLock) Lock()   { l.token <- struct{}{} }
func (l planLock) Unlock() { <-l.token }

// lockOr takes the lock, unless done is closed first; it reports whether
// it took it.
func (l planLock) lockOr(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
	}
	select {
	case l.token <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// batchQueue holds work waiting for the next holder of the plan lock, who
// takes all of it at once.
type batchQueue[T any] struct {
	mu    sync.Mutex
	items []T
}

func (q *batchQueue[T]) push(t T) {
	q.mu.Lock()
	q.items = append(q.items, t)
	q.mu.Unlock()
}

func (q *batchQueue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

func (q *batchQueue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// createReq is one CreateCluster waiting for the next holder of the plan
// lock, which plans and commits every waiting create together: concurrent
// creates share one plan and one commit instead of queueing for one each.
type createReq struct {
	cl   domain.Cluster
	also []func(tx store.Tx, id string) error
	done chan struct{}
	err  error
}

// flushCreates answers the queued creates; c.mu is held. The batch runs
// on a context of its own: one client going away must not fail the
// creates of the others.
func (c *Controller) flushCreates(ctx context.Context) {
	batch := c.cq.take()
	if len(batch) == 0 {
		return
	}
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	c.createBatch(ctx, batch)
}

// createBatch creates the clusters of rs that conflict with no other and
// whose standard capacity can be found, in one plan and one commit, and
// sets each request's error. If the commit fails (one request's own
// writes, say), each request is planned and committed alone, for its own
// answer.
func (c *Controller) createBatch(ctx context.Context, rs []*createReq) {
	now := c.clock.Now()
	s, err := c.snapshot(ctx)
	if err != nil {
		for _, r := range rs {
			r.err = err
		}
		return
	}
	existing := s.Clusters
	var accepted []*createReq
	for _, r := range rs {
		cl := &r.cl
		if cl.ID == "" {
			cl.ID = c.NewID("c-")
		}
		cl.CreatedAt, cl.Status = now, domain.StatusWaiting
		if cl.Weight <= 0 {
			cl.Weight = 1
		}
		r.err = nil
		clash := func(o domain.Cluster) bool { return o.ProjectID == cl.ProjectID && o.Name == cl.Name && !o.Deleting }
		if i := slices.IndexFunc(existing, clash); i >= 0 {
			r.err = fmt.Errorf("project %s already has a cluster named %q (%s): %w", cl.ProjectID, cl.Name, existing[i].ID, domain.ErrConflict)
			continue
		}
		if i := slices.IndexFunc(accepted, func(a *createReq) bool { return clash(a.cl) }); i >= 0 {
			r.err = fmt.Errorf("project %s already has a cluster named %q (%s): %w", cl.ProjectID, cl.Name, accepted[i].cl.ID, domain.ErrConflict)
			continue
		}
		accepted = append(accepted, r)
	}
	// Plan with every accepted create; refuse those left short and plan
	// again without them, until none is.
	var pl allocator.Plan
	for len(accepted) > 0 {
		s.Clusters = slices.Clip(existing)
		for _, r := range accepted {
			s.Clusters = append(s.Clusters, r.cl)
		}
		pl = c.plan(s, now)
		var keep []*createReq
		for _, r := range accepted {
			if sf := shortfallOf(pl, r.cl.ID); sf != nil {
				r.err = &ShortfallError{*sf}
				continue
			}
			keep = append(keep, r)
		}
		if len(keep) == len(accepted) {
			break
		}
		accepted = keep
	}
	if len(accepted) == 0 {
		return
	}
	fresh := make([]domain.Cluster, len(accepted))
	for i, r := range accepted {
		fresh[i] = r.cl
	}
	err = c.commit(ctx, s, pl, now, commitWrites{create: fresh, created: func(tx store.Tx) error {
		for _, r := range accepted {
			for _, f := range r.also {
				if err := f(tx, r.cl.ID); err != nil {
					return err
				}
			}
		}
		return nil
	}})
	switch {
	case err == nil:
	case len(accepted) == 1:
		accepted[0].err = fmt.Errorf("create cluster %s: %w", accepted[0].cl.ID, err)
	default:
		for _, r := range accepted {
			c.createBatch(ctx, []*createReq{r})
		}
	}
}

// UpdateCluster changes a cluster's standard GPUs and/or preemptible
// target (nil keeps the value). Growing standard capacity is synchronous
// like a create: refused with *ShortfallError, changing nothing, when it
// cannot be found.
func (c *Controller) UpdateCluster(ctx context.Context, id string, numGPUs, preemptible *int) (domain.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, i, err := c.snapshotWith(ctx, id)
	if err != nil {
		return domain.Cluster{}, err
	}
	cl := s.Clusters[i]
	if cl.Deleting {
		return domain.Cluster{}, ErrDeleting
	}
	grows := false
	if numGPUs != nil {
		grows = *numGPUs > cl.NumGPUs
		cl.NumGPUs = *numGPUs
	}
	if preemptible != nil {
		cl.DesiredPreemptibleGPUs = *preemptible
	}
	s.Clusters[i] = cl
	pl := c.plan(s, now)
	if sf := shortfallOf(pl, id); sf != nil && grows {
		return domain.Cluster{}, &ShortfallError{*sf}
	}
	err = c.commit(ctx, s, pl, now, commitWrites{before: func(tx store.Tx) error {
		cur, err := tx.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		cur.NumGPUs, cur.DesiredPreemptibleGPUs = cl.NumGPUs, cl.DesiredPreemptibleGPUs
		return tx.UpdateCluster(ctx, cur)
	}})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("update cluster %s: %w", id, err)
	}
	c.Kick()
	return c.store.GetCluster(ctx, id)
}

// SetWeight changes a cluster's weight in the max-min fair sharing of
// spare capacity (1..domain.MaxWeight). It is committed with the plan made
// with the new weight, so preemptible nodes move toward the new shares
// (with the usual drain) at once.
func (c *Controller) SetWeight(ctx context.Context, id string, weight int) (domain.Cluster, error) {
	if weight < 1 || weight > domain.MaxWeight {
		return domain.Cluster{}, fmt.Errorf("set weight of cluster %s: weight %d is not in 1..%d", id, weight, domain.MaxWeight)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, i, err := c.snapshotWith(ctx, id)
	if err != nil {
		return domain.Cluster{}, err
	}
	if s.Clusters[i].Deleting {
		return domain.Cluster{}, ErrDeleting
	}
	s.Clusters[i].Weight = weight
	pl := c.plan(s, now)
	err = c.commit(ctx, s, pl, now, commitWrites{before: func(tx store.Tx) error {
		cur, err := tx.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		cur.Weight = weight
		return tx.UpdateCluster(ctx, cur)
	}})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("set weight of cluster %s: %w", id, err)
	}
	c.Kick()
	return c.store.GetCluster(ctx, id)
}

// DeleteCluster marks the cluster for deletion and starts draining all its
// nodes, standard ones too. The cluster disappears once every node is
// removed.
func (c *Controller) DeleteCluster(ctx context.Context, id string) (domain.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, i, err := c.snapshotWith(ctx, id)
	if err != nil {
		return domain.Cluster{}, err
	}
	s.Clusters[i].Deleting = true
	pl := c.plan(s, now)
	added := false
	err = c.commit(ctx, s, pl, now, commitWrites{before: func(tx store.Tx) error {
		added = false
		cur, err := tx.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		if cur.Deleting {
			return nil
		}
		cur.Deleting, added = true, true
		if _, err := tx.AddEvent(ctx, domain.Event{
			ID: c.NewID("ev-"), ClusterID: id, Reason: domain.ReasonClusterDeleting, Timestamp: now,
			Message: "cluster deletion requested; every node is drained and its machine freed",
		}); err != nil {
			return err
		}
		return tx.UpdateCluster(ctx, cur)
	}})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("delete cluster %s: %w", id, err)
	}
	if added {
		// ClusterDeleting is an event too: wake the event streams even
		// when the plan itself added none (a cluster with no nodes).
		c.notify()
	}
	c.Kick()
	return c.store.GetCluster(ctx, id)
}

// snapshotWith reads a snapshot and finds cluster id in it. Its clusters
// are the caller's to change (a snapshot's slices are shared otherwise).
func (c *Controller) snapshotWith(ctx context.Context, id string) (allocator.Snapshot, int, error) {
	s, err := c.snapshot(ctx)
	if err != nil {
		return s, -1, err
	}
	s.Clusters = slices.Clone(s.Clusters)
	for i := range s.Clusters {
		if s.Clusters[i].ID == id {
			return s, i, nil
		}
	}
	return s, -1, domain.ErrNotFound
}

func shortfallOf(pl allocator.Plan, id string) *allocator.Shortfall {
	for i := range pl.Shortfalls {
		if pl.Shortfalls[i].ClusterID == id {
			return &pl.Shortfalls[i]
		}
	}
	return nil
}

// Plan returns the plan the allocator would make now, without applying it
// (a dry run).
func (c *Controller) Plan(ctx context.Context) (allocator.Plan, error) {
	s, err := c.snapshot(ctx)
	if err != nil {
		return allocator.Plan{}, err
	}
	return c.plan(s, c.clock.Now()), nil
}

// prefetchClusters reads into known, in one query, the clusters commit
// writes that known does not have: those pl provisions nodes for and
// those whose state changes (not unchanged).
func prefetchClusters(ctx context.Context, tx store.Tx, pl allocator.Plan, unchanged func(int, allocator.ClusterState) bool, known map[string]*domain.Cluster) error {
	var ids []string
	for _, p := range pl.Provisions {
		if known[p.ClusterID] == nil {
			ids = append(ids, p.ClusterID)
		}
	}
	for i, cs := range pl.Clusters {
		if cs.ClusterID != "" && known[cs.ClusterID] == nil && !unchanged(i, cs) {
			ids = append(ids, cs.ClusterID)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	cls, err := store.ClustersByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	for i := range cls {
		known[cls[i].ID] = &cls[i]
	}
	return nil
}

// commitWrites are what a commit writes besides the plan.
type commitWrites struct {
	// before writes first: a request's change to an existing cluster.
	before func(store.Tx) error
	// create are new clusters (a batch of creates), each written once
	// with the state and node count the plan gives it rather than
	// inserted and then updated; created then writes what goes with them
	// (their kubeconfigs), before their nodes.
	create  []domain.Cluster
	created func(store.Tx) error
}

// commit writes, in one transaction, w's writes, then the plan's intents:
// drains with their deadlines, new nodes, and the lifecycle events they
// imply, and the states of the clusters that changed from s, the snapshot
// pl was planned on (a fleet's thousand clusters are not rewritten for
// every node).
func (c *Controller) commit(ctx context.Context, s allocator.Snapshot, pl allocator.Plan, now time.Time, w commitWrites) error {
	var obs []Observation
	events := 0
	err := c.store.Update(ctx, func(tx store.Tx) error {
		obs, events = obs[:0], 0
		if w.before != nil {
			if err := w.before(tx); err != nil {
				return err
			}
		}
		// A burst's plan reclaims hundreds of nodes: read them in one
		// query, not one each.
		tx, err := prefetch(ctx, tx, pl.Reclaims, func(r allocator.Reclaim) string { return r.NodeID })
		if err != nil {
			return err
		}
		// The clusters the plan provisions for or changes the state of,
		// read in one query.
		unchanged := func(i int, cs allocator.ClusterState) bool {
			return i < len(s.Clusters) && s.Clusters[i].ID == cs.ClusterID && !statusChanged(s.Clusters[i], cs, now)
		}
		// The new clusters are not in the store yet: their rows are
		// worked out here and written below.
		clusters := make(map[string]*domain.Cluster, len(w.create))
		for i := range w.create {
			cl := w.create[i]
			clusters[cl.ID] = &cl
		}
		if err := prefetchClusters(ctx, tx, pl, unchanged, clusters); err != nil {
			return err
		}
		getCluster := func(id string) (*domain.Cluster, error) {
			if cl, ok := clusters[id]; ok {
				return cl, nil
			}
			cl, err := tx.GetCluster(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", id, err)
			}
			clusters[id] = &cl
			return &cl, nil
		}
		// The plan's events (a burst posts a notice per reclaim) go in a
		// few statements at the end.
		var pending []domain.Event
		addEvent := func(e domain.Event) error {
			e.ID = c.NewID("ev-")
			e.Timestamp = now
			pending = append(pending, e)
			events++
			obs = append(obs, Observation{Time: now, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message})
			return nil
		}

		// The reclaimed nodes are written in a few statements, before the
		// new nodes: those may take the machines they free.
		reclaimed := make([]domain.Node, 0, len(pl.Reclaims))
		for _, r := range pl.Reclaims {
			n, err := tx.GetNode(ctx, r.NodeID)
			if err != nil {
				return fmt.Errorf("reclaim node %s: %w", r.NodeID, err)
			}
			if !n.State.Live() {
				continue
			}
			n.DrainCause = r.Cause
			n.DrainStartedAt = now
			// Decide by the node's state now rather than the plan's view:
			// a pending node may have started provisioning since.
			switch {
			case n.State == domain.NodePending:
				n.State, n.RemovedAt = domain.NodeRemoved, now
			default:
				// A provisioning node gets the full notice too: its Node
				// may have joined the cluster and taken pods before the
				// controller recorded it ready. One that never joined has
				// nothing to notify and is released at once.
				n.State, n.Deadline, n.Notified = domain.NodeDraining, r.Deadline, false
				reason, msg := drainMessage(n, r.Cause)
				if err := addEvent(domain.Event{ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name, Reason: reason, Message: msg, Deadline: r.Deadline}); err != nil {
					return err
				}
				if !n.ReadyAt.IsZero() {
					obs = append(obs, drainObservation(KindDrainStarted, n, now))
				}
			}
			reclaimed = append(reclaimed, n)
		}
		if err := store.UpdateNodes(ctx, tx, reclaimed); err != nil {
			return fmt.Errorf("reclaim %d nodes: %w", len(reclaimed), err)
		}

		created := make([]domain.Node, 0, len(pl.Provisions))
		for _, p := range pl.Provisions {
			cl, err := getCluster(p.ClusterID)
			if err != nil {
				return err
			}
			cl.NodeSeq++
			n := domain.Node{
				ID: c.NewID("n-"), ClusterID: cl.ID, MachineID: p.MachineID, Class: p.Class, GPUs: p.GPUs,
				Name: domain.NodeName(p.Class, cl.NodeSeq), State: domain.NodeProvisioning, CreatedAt: now,
				ProvisioningAt: now,
			}
			if p.Pending {
				n.State, n.ProvisioningAt = domain.NodePending, time.Time{}
			}
			created = append(created, n)
		}

		for i, cs := range pl.Clusters {
			if cs.ClusterID == "" {
				continue
			}
			if _, touched := clusters[cs.ClusterID]; !touched && unchanged(i, cs) {
				continue
			}
			cur, err := getCluster(cs.ClusterID)
			if err != nil {
				return err
			}
			prev := cur.Unfulfilled
			cur.Status, cur.Unfulfilled, cur.UnfulfilledMessage = cs.Status, cs.Unfulfilled, cs.Message
			// How long the target has been unmet decides who gets the
			// next freed node; it is kept with the status it follows.
			cur.UnmetSince = allocator.UnmetSince(cur.UnmetSince, cs, now)
			if cs.Unfulfilled != prev && !cur.Deleting {
				switch {
				case cs.Unfulfilled != "" && cs.Unfulfilled != domain.UnfulfilledProvisioning:
					err = addEvent(domain.Event{ClusterID: cur.ID, Reason: domain.ReasonTargetUnfulfilled,
						Message: fmt.Sprintf("%s: %s", cs.Unfulfilled, cs.Message)})
				case cs.Unfulfilled == "" && cur.DesiredPreemptibleGPUs > 0:
					err = addEvent(domain.Event{ClusterID: cur.ID, Reason: domain.ReasonTargetFulfilled,
						Message: fmt.Sprintf("%d of %d preemptible GPUs allocated", cs.AllocatedPreemptibleGPUs, cur.DesiredPreemptibleGPUs)})
				}
				if err != nil {
					return err
				}
			}
		}
		// The new clusters go in first, for their nodes to refer to.
		fresh := make([]domain.Cluster, len(w.create))
		for i, cl := range w.create {
			fresh[i] = *clusters[cl.ID]
			delete(clusters, cl.ID)
		}
		if err := store.CreateClusters(ctx, tx, fresh); err != nil {
			return fmt.Errorf("create %d clusters: %w", len(fresh), err)
		}
		if w.created != nil {
			if err := w.created(tx); err != nil {
				return err
			}
		}
		// In a few statements: a plan may provision thousands of nodes.
		if err := store.CreateNodes(ctx, tx, created); err != nil {
			return fmt.Errorf("provision %d nodes: %w", len(created), err)
		}
		changed := make([]domain.Cluster, 0, len(clusters))
		for _, cl := range clusters {
			changed = append(changed, *cl)
		}
		slices.SortFunc(changed, func(a, b domain.Cluster) int { return strings.Compare(a.ID, b.ID) })
		if err := store.UpdateClusters(ctx, tx, changed); err != nil {
			return fmt.Errorf("update %d clusters: %w", len(changed), err)
		}
		return store.AddEvents(ctx, tx, pending)
	})
	if err != nil {
		return err
	}
	c.observe(obs)
	if events > 0 {
		c.notify()
	}
	return nil
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

func drainMessage(n domain.Node, cause domain.DrainCause) (domain.EventReason, string) {
	switch cause {
	case domain.CauseScaledDown:
		return domain.ReasonScaledDown, fmt.Sprintf("node %s is drained because the cluster was scaled down; pods get SIGTERM and the node is removed once they exit", n.Name)
	case domain.CauseClusterDeleted:
		return domain.ReasonScaledDown, fmt.Sprintf("node %s is drained because the cluster is being deleted", n.Name)
	case domain.CauseOutOfService:
		return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed: its machine is going out of service; pods get SIGTERM, the node is removed once they exit or at the deadline", n.Name)
	case domain.CauseFairShare:
		return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed to give another cluster its fair share of spare capacity; pods get SIGTERM, the node is removed once they exit or at the deadline", n.Name)
	}
	return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed: its machine is needed for standard nodes; pods get SIGTERM, the node is removed once they exit or at the deadline", n.Name)
}
