// Package ha lets several sparecap servers share one PostgreSQL database:
// one is elected leader through a lease row in the database (see
// store.Leases) and runs the controller and the meter for a term; the
// others serve reads and forward writes to it (Forwarder). A term's
// commits are fenced by its epoch, so a leader that lost its lease
// without noticing (paused, cut off) cannot commit after a new one began.
package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/store"
)

// Defaults of Config.
const (
	DefaultTTL   = 3 * time.Second
	DefaultRenew = time.Second
	DefaultRetry = 500 * time.Millisecond
)

// Config of an Elector.
type Config struct {
	// Holder names this server in the lease (default: random).
	Holder string
	// Address is where this server serves the API, for followers to
	// forward writes to.
	Address string
	// TTL is how long a lease lasts unless renewed: how long a dead
	// leader's term can block a new one (default 3s).
	TTL time.Duration
	// Renew is how often the leader renews (default 1s); Retry how often a
	// follower tries to acquire (default 500ms).
	Renew, Retry time.Duration
	// Clock times the lease on this side (default: the real clock; the
	// lease's own times are the database's).
	Clock clock.Clock
	Log   *slog.Logger
}

// Elector campaigns for the leader lease and runs terms.
type Elector struct {
	st  store.Leases
	cfg Config

	tried     chan struct{} // closed after the first campaign attempt
	triedOnce sync.Once

	mu     sync.Mutex
	epoch  int64       // current term while leading, else -1
	leader store.Lease // the lease as last seen
	seen   time.Time   // when leader was read (local clock)
	change chan struct{}
}

// NewElector returns an elector; Run campaigns.
func NewElector(st store.Leases, cfg Config) *Elector {
	if cfg.Holder == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.Holder = "srv-" + hex.EncodeToString(b[:])
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Renew <= 0 {
		cfg.Renew = min(DefaultRenew, cfg.TTL/3)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = min(DefaultRetry, cfg.TTL/3)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Elector{st: st, cfg: cfg, epoch: -1, change: make(chan struct{}), tried: make(chan struct{})}
}

// Tried returns a channel closed once Run has made its first attempt at
// the lease (and, if it won, this server leads).
func (e *Elector) Tried() <-chan struct{} { return e.tried }

// Holder is this server's name in the lease.
func (e *Elector) Holder() string { return e.cfg.Holder }

// Epoch returns the current term while this server leads, else -1.
func (e *Elector) Epoch() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.epoch
}

// Leader returns the leader's API address as last seen, and whether a
// leader is known (this server's own address while it leads).
func (e *Elector) Leader() (address string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epoch >= 0 {
		return e.cfg.Address, true
	}
	l := e.leader
	// The lease as read, aged by the local clock since.
	if l.Holder == "" || e.cfg.Clock.Now().Sub(e.seen) >= l.Expires.Sub(l.Now) {
		return "", false
	}
	return l.Address, true
}

// LeaderNow is Leader, except that when the lease as last seen has aged
// out it reads the lease from the store once more before saying there is
// none: a follower whose campaign loop was held up (a loaded machine, a
// slow database) must not refuse writes while a leader renews its lease.
func (e *Elector) LeaderNow(ctx context.Context) (address string, ok bool) {
	if address, ok = e.Leader(); ok {
		return address, ok
	}
	sent := e.cfg.Clock.Now()
	l, err := e.st.GetLease(ctx)
	if err != nil {
		return "", false
	}
	e.mu.Lock()
	// Only what is newer, and never over a term this server began since.
	if e.epoch < 0 && sent.After(e.seen) {
		e.setLocked(-1, l, sent)
	}
	e.mu.Unlock()
	return e.Leader()
}

// Changed returns a channel closed when leadership changes hands (as this
// server sees it).
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.change
}

func (e *Elector) set(epoch int64, l store.Lease, seen time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setLocked(epoch, l, seen)
}

func (e *Elector) setLocked(epoch int64, l store.Lease, seen time.Time) {
	changed := e.epoch != epoch || e.leader.Holder != l.Holder || e.leader.Epoch != l.Epoch
	e.epoch, e.leader, e.seen = epoch, l, seen
	if changed {
		close(e.change)
		e.change = make(chan struct{})
	}
}

// Run campaigns until ctx ends. Each time this server becomes leader it
// calls term with a context that ends with the term and the term's
// epoch, and waits for term to return before campaigning again. A term
// ends when the lease is lost (another server holds it, or it could not
// be renewed before it expired by this server's clock) or when ctx ends;
// then the lease is released so a follower need not wait for it to
// expire.
func (e *Elector) Run(ctx context.Context, term func(ctx context.Context, epoch int64)) {
	for ctx.Err() == nil {
		l, ok := e.acquire(ctx)
		if !ok {
			continue
		}
		e.lead(ctx, l, term)
	}
}

// acquire tries once, then waits Retry; it returns the lease when won.
func (e *Elector) acquire(ctx context.Context) (store.Lease, bool) {
	sent := e.cfg.Clock.Now()
	l, ok, err := e.st.AcquireLease(ctx, e.cfg.Holder, e.cfg.Address, e.cfg.TTL)
	if !ok {
		defer e.triedOnce.Do(func() { close(e.tried) })
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.cfg.Log.Warn("cannot campaign for the leader lease", "err", err)
		}
	case ok:
		return l, true
	default:
		if cur, err := e.st.GetLease(ctx); err == nil {
			e.set(-1, cur, sent)
		}
	}
	select {
	case <-ctx.Done():
	case <-e.cfg.Clock.After(e.cfg.Retry):
	}
	return store.Lease{}, false
}

// lead runs one term.
func (e *Elector) lead(ctx context.Context, l store.Lease, term func(context.Context, int64)) {
	// The lease runs out TTL after the request was sent at the latest (the
	// database started counting later): the local deadline is safe.
	until := e.cfg.Clock.Now().Add(e.cfg.TTL)
	e.set(l.Epoch, l, e.cfg.Clock.Now())
	e.triedOnce.Do(func() { close(e.tried) })
	e.cfg.Log.Info("leader: term begins", "holder", e.cfg.Holder, "epoch", l.Epoch)
	termCtx, end := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); term(termCtx, l.Epoch) }()
	why := "shutting down"
	// Renewals keep a steady beat, as a ticker's (one that ran late is
	// not caught up).
	next := e.cfg.Clock.Now().Add(e.cfg.Renew)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-done:
			why = "the term's work stopped"
			break loop
		case <-e.cfg.Clock.After(next.Sub(e.cfg.Clock.Now())):
		}
		if next = next.Add(e.cfg.Renew); next.Before(e.cfg.Clock.Now()) {
			next = e.cfg.Clock.Now().Add(e.cfg.Renew)
		}
		sent := e.cfg.Clock.Now()
		rctx, cancel := context.WithDeadline(ctx, until)
		ok, err := e.st.RenewLease(rctx, e.cfg.Holder, l.Epoch, e.cfg.TTL)
		cancel()
		switch {
		case err == nil && ok:
			until = sent.Add(e.cfg.TTL)
		case err == nil:
			why = "another server holds the lease"
			break loop
		case !e.cfg.Clock.Now().Before(until):
			why = "the lease expired before it could be renewed: " + err.Error()
			break loop
		}
	}
	// Not leader any more before the term's work hears of it: writes
	// arriving now are forwarded or refused, not served here.
	e.set(-1, store.Lease{}, e.cfg.Clock.Now())
	e.cfg.Log.Info("leader: term ends", "holder", e.cfg.Holder, "epoch", l.Epoch, "why", why)
	end()
	<-done
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	if err := e.st.ReleaseLease(rctx, e.cfg.Holder, l.Epoch); err != nil {
		e.cfg.Log.Warn("cannot release the leader lease; it expires on its own", "err", err)
	}
	cancel()
	e.cfg.Log.Info("leader: the term's work has stopped", "epoch", l.Epoch)
}
