package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/console"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/guard"
	"github.com/sparecap/sparecap/internal/ha"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/metrics"
	"github.com/sparecap/sparecap/internal/queues/manager"
	"github.com/sparecap/sparecap/internal/retention"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/webhook"
	"github.com/sparecap/sparecap/internal/worklog"
)

// boot is a server being started: what each step of Start builds, for
// the next ones.
type boot struct {
	o      Options
	s      *Server
	shared bool // on PostgreSQL: several servers, one leader
	fenced *store.Fenced
	cached *store.Cached
	sealer *secret.Sealer
	api    *api.Server
	// served is the handler of the API and the console; metrics of
	// /metrics.
	served, metrics http.Handler
	// conns shares the API listener's connections.
	conns guard.ConnLimits
	// settled: the first campaign for leadership is over.
	settled atomic.Bool
	// unlock releases the data directory's locks; closeMachines stops the
	// machine provider; side are the extra listeners' servers.
	unlock        func()
	closeMachines func()
	side          []*http.Server
}

// Start opens everything and starts serving; Wait or Close ends it.
func Start(ctx context.Context, o Options) (*Server, error) {
	b := &boot{o: withDefaults(o)}
	if err := b.state(ctx); err != nil {
		return nil, err
	}
	steps := []func() error{b.drivers, b.listen, b.handlers, b.httpServer, b.sideListeners}
	for _, step := range steps {
		if err := step(); err != nil {
			b.fail()
			return nil, err
		}
	}
	b.serve(ctx)
	b.settle()
	o = b.o
	o.Log.Info("sparecap server started", "url", b.s.URL, "data_dir", o.DataDir, "speed", max(o.Speed, 1), "machines", countMachines(b.s.Fleet))
	return b.s, nil
}

func withDefaults(o Options) Options {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8407"
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir()
	}
	if o.PreemptibleDiscount == "" {
		o.PreemptibleDiscount = "50"
	}
	if o.Clock == nil {
		// The one real clock of the server; everything it builds gets it
		// (or the clock Speed derives from it).
		o.Clock = clock.Real{}
	}
	return o
}

// fail undoes what the steps so far opened.
func (b *boot) fail() {
	if b.s.ln != nil {
		b.s.ln.Close()
	}
	for _, srv := range b.side {
		srv.Close()
	}
	if b.closeMachines != nil {
		b.closeMachines()
	}
	b.s.Store.Close()
	b.unlock()
}

// state opens the data directory, the fleet, the clock and the store, and
// registers the fleet and its prices.
func (b *boot) state(ctx context.Context) error {
	o := b.o
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// The data directory holds the database, the kubeconfig sealing key
	// and the admin token: nobody else may read it.
	if err := tighten(o.DataDir, o.Log); err != nil {
		return err
	}
	f := fleet.Default()
	if o.FleetFile != "" {
		var err error
		if f, err = fleet.Load(o.FleetFile); err != nil {
			return err
		}
	}
	clk, err := loadClock(filepath.Join(o.DataDir, "clock.json"), o.Speed, o.Clock)
	if err != nil {
		return err
	}
	st, unlock, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	b.unlock = unlock
	b.s = &Server{Store: st, Clock: clk, Speed: max(o.Speed, 1), Fleet: f, done: make(chan error, 1)}
	if err := b.register(ctx); err != nil {
		b.fail()
		return err
	}
	return nil
}

// register writes the fleet and its prices, and makes the simulation and
// the first operator token; it sets up the store's fencing and its
// in-memory copy.
func (b *boot) register(ctx context.Context) error {
	o, s := b.o, b.s
	st, clk := s.Store, s.Clock
	// What writes only while this server leads goes through fenced: on
	// PostgreSQL its commits carry the term's epoch (none are allowed
	// before the first term); on SQLite this server alone uses the file
	// (see lockFile) and leads for as long as it runs.
	b.shared = isPostgres(o.DB)
	b.fenced = store.NewFenced(st)
	if b.shared {
		b.fenced.SetEpoch(-1)
	}
	// While this server leads, the world the controller plans on is kept
	// in memory, written through (see store.Cached).
	b.cached = store.NewCached(b.fenced)
	if _, err := fleet.Register(ctx, st, s.Fleet, clk.Now()); err != nil {
		return fmt.Errorf("register fleet: %w", err)
	}
	if err := fleet.RegisterPrices(ctx, st, s.Fleet, o.PreemptibleDiscount, clk.Now()); err != nil {
		return fmt.Errorf("register prices: %w", err)
	}
	var err error
	s.Sim, err = sim.New(sim.Config{Clock: clk, ProvisionTime: o.ProvisionTime, WipeTime: o.WipeTime, Seed: o.SimSeed,
		Pods: o.SimPods, StatePath: filepath.Join(o.DataDir, "sim-state.json")})
	if err != nil {
		return err
	}
	if s.AdminToken, err = adminToken(o); err != nil {
		return err
	}
	// Kubeconfigs are sealed with a key kept in the data dir, apart from
	// the database (which may be a shared PostgreSQL).
	if o.SecretKeyFile != "" {
		b.sealer, err = secret.LoadKey(o.SecretKeyFile)
	} else {
		b.sealer, err = secret.LoadOrCreateKey(filepath.Join(o.DataDir, "secret.key"))
	}
	if err != nil {
		return err
	}
	// Operator tokens live in the store; the configured (or generated)
	// one starts things off when the store has none. Tokens are on the
	// wall clock (o.Clock), not the server's, which --speed runs ahead.
	active, err := api.BootstrapOperator(ctx, st, s.AdminToken, o.Clock.Now())
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if !active {
		o.Log.Warn("the configured admin token (SPARECAP_ADMIN_TOKEN, or the data directory's admin-token) is not an active operator token: operators rotated or revoked it; sign in with a current operator token (sparecap tokens list shows them)")
	}
	return nil
}

// drivers builds the fleet's driver (platforms), the machine provider,
// the controller, the metrics and the meter.
func (b *boot) drivers() error {
	o, s := b.o, b.s
	clk := s.Clock
	interval := time.Second
	if o.Speed > 1 {
		// Poll about 10 times a wall second whatever the speed.
		interval = time.Duration(float64(100*time.Millisecond) * o.Speed)
	}
	if err := b.platforms(); err != nil {
		return err
	}
	machines, closeMachines, err := machineProvider(o, s)
	if err != nil {
		return err
	}
	b.closeMachines = closeMachines
	s.Controller = controller.New(b.cached, s.Drivers, machines, clk, controller.Config{
		DrainWindow: o.DrainWindow, MinLease: s.Fleet.Leases(), Cooldown: o.Cooldown, Interval: interval, Workers: o.Workers, NoticeWorkers: o.NoticeWorkers,
		NodeLostAfter: o.NodeLostAfter, RegisterTimeout: o.RegisterTimeout,
		SweepEvery: atLeastReal(time.Minute, 10*time.Second, s.Speed),
	}, o.Log)
	s.Controller.OnClusterGone = s.Drivers.Reload
	s.Metrics = metrics.New(b.cached, o.Clock)
	s.Metrics.SetPriceClock(s.Clock)
	s.Controller.Observer = s.Metrics.Observe
	// The meter writes only usage records, none of the snapshot's rows:
	// its long transactions need not wait for the copy's writers.
	s.Meter = metering.New(b.fenced, clk, o.Log)
	s.Meter.Reads = b.cached
	// The refresh rewrites every running node's record (62,877 at a
	// million GPUs, a second of CPU): at least five real minutes apart
	// on a fast clock. It bounds only how far a follower's usage answers
	// trail; the leader's cut before every usage query is exact.
	s.Meter.Refresh = atLeastReal(metering.DefaultRefresh, 5*time.Minute, s.Speed)
	s.Meter.OnBilled = s.Metrics.AddBilledGPUSeconds
	budgets := &budget.Checker{Store: b.fenced, Observe: s.Metrics.ObserveBudgets, Raised: s.Metrics.BudgetAlert}
	s.Meter.AfterPass = func(ctx context.Context) {
		if err := checkBudgets(ctx, budgets, s.Store, clk.Now()); err != nil && ctx.Err() == nil {
			o.Log.Error("budgets", "err", err)
		}
	}
	// Webhooks write only their own tables, fenced like the meter's.
	s.Webhooks = webhook.New(webhook.Config{Store: b.fenced, Driver: s.Drivers, Sealer: b.sealer, Clock: o.Clock, Timer: o.Clock,
		Policy: webhook.Policy{Allow: o.WebhookAllow}, MaxPending: o.WebhookMaxPending, Changed: s.Controller.Changed, Log: o.Log})
	budgets.Queue = s.Webhooks.QueueBudgetAlerts
	return nil
}

// checkBudgets checks every budget at now, priced by the price book.
func checkBudgets(ctx context.Context, c *budget.Checker, st store.Store, now time.Time) error {
	prices, err := st.ListPrices(ctx)
	if err != nil {
		return err
	}
	book, err := billing.NewBook(prices)
	if err != nil {
		return err
	}
	return c.Check(ctx, book, now)
}

// slurmDir clears and returns <data-dir>/slurm, owner only, where the
// Slurm commands' copies of the attached slurm.confs live while their
// drivers run (slurm.Options.Dir): a server killed leaves its copies
// behind, and its next start removes them. The directory is locked for
// this server first, so that a second one given the same data directory
// by mistake cannot remove the copies of the first.
func (b *boot) slurmDir() (string, error) {
	unlock, err := lockFile(filepath.Join(b.o.DataDir, "slurm.lock"),
		"another sparecap server is using this data directory: every server needs its own --data-dir")
	if err != nil {
		return "", err
	}
	prev := b.unlock
	b.unlock = func() { unlock(); prev() }
	dir := filepath.Join(b.o.DataDir, "slurm")
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear the slurm.conf copies in %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("the directory of the slurm.conf copies: %w", err)
	}
	return dir, nil
}

// handlers builds the API, the console and /metrics, behind the guard,
// and, on PostgreSQL, the election and the forwarding of writes to the
// leader.
func (b *boot) handlers() error {
	o, s := b.o, b.s
	a := api.New(b.cached, s.Controller, s.Clock, o.Clock, o.Log)
	b.api = a
	a.UsageRetention, a.SpanRetention = b.rawRetention()
	a.Quota = b.quotaKeeper(a)
	a.Meter = leaderMeter{s}
	a.Sealer = b.sealer
	a.MinLease = s.Fleet.Leases()
	a.AllowKubeconfigPlugins = o.AllowKubeconfigPlugins
	register := o.MachineProvider == "register"
	a.CheckAccess = func(ctx context.Context, kubeconfig []byte) (domain.Access, error) {
		return kube.CheckKubeconfigAccess(ctx, kubeconfig, register, cmp.Or(o.Kube.Timeout, kube.DefaultTimeout), s.Clock.Now())
	}
	a.CheckSlurm = func(ctx context.Context, conf []byte) error {
		opts := o.Slurm
		opts.Log, opts.Clock = o.Log, o.Clock
		return slurm.Check(ctx, conf, opts)
	}
	a.Webhooks = api.WebhookOptions{Policy: webhook.Policy{Allow: o.WebhookAllow}, OnMessage: s.Webhooks.Kick}
	a.OnKubeconfig = func(id string) {
		s.Drivers.Reload(id)
		s.Controller.Kick()
	}
	sessions := console.NewSessions(o.Clock)
	a.Sessions = sessions
	lim := o.Limits
	trusted, err := guard.ParsePrefixes(lim.TrustedProxies)
	if err != nil {
		return fmt.Errorf("trusted proxies: %w", err)
	}
	addrs := guard.Addrs{Trusted: trusted}
	a.Addrs = addrs
	a.PerToken = guard.NewLimiter(lim.TokenRate, int(2*lim.TokenRate))
	a.AuthFailures = guard.NewLimiter(float64(lim.AuthFailures)/60, lim.AuthFailures)
	a.MaxStreams = cmp.Or(lim.MaxStreamsPerProject, DefaultMaxStreamsPerProject)
	a.MaxTokens = cmp.Or(lim.MaxTokensPerProject, DefaultMaxTokensPerProject)
	a.TokenMints = guard.NewLimiter(lim.TokenMintsPerMinute/60, int(lim.TokenMintsPerMinute))
	a.BudgetWrites = guard.NewLimiter(lim.BudgetWritesPerMinute/60, int(lim.BudgetWritesPerMinute))
	var instrumented http.Handler = s.Metrics.Middleware(a)
	if b.shared {
		if instrumented, err = b.elect(instrumented); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	b.metrics = metricsAuth(s.Metrics.Handler(), o.MetricsToken)
	if o.MetricsAddr == "" {
		mux.Handle("GET /metrics", b.metrics)
		if o.MetricsToken == "" {
			o.Log.Warn("/metrics is served on the API's listener without authentication, and names projects and clusters; set --metrics-addr or SPARECAP_METRICS_TOKEN")
		}
	}
	con := console.New(instrumented, sessions, s.Clock, o.Log)
	con.Speed = s.Speed
	mux.Handle("/console/", con)
	mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	mux.Handle("/", instrumented)
	health := func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" }
	guarded := guard.Handler(mux, guard.Options{
		Addrs:   addrs,
		MaxBody: maxAPIBody,
		MaxBodyFor: func(r *http.Request) int64 {
			if strings.HasPrefix(r.URL.Path, "/console/") {
				return maxFormBody // sign-in and cluster forms
			}
			return maxAPIBody
		},
		PerAddress: guard.NewLimiter(lim.AddressRate, int(2*lim.AddressRate)),
		Exempt:     health,
		Reject:     api.Reject,
	})
	b.served = guard.ConnHandler(guarded, health, api.Reject, b.conns)
	return nil
}

// elect sets up leader election on the shared database: followers serve
// reads and forward writes to the leader (usage and invoices too, while a
// leader answers: it meters to the second; what is stored lags by up to
// the meter's Refresh).
func (b *boot) elect(next http.Handler) (http.Handler, error) {
	o, s := b.o, b.s
	// The lease holder's name is the data directory's, which this process
	// locks: a server restarted after a crash takes its own lease back at
	// once instead of waiting for it to expire.
	holder, unlockDir, err := serverID(o.DataDir)
	if err != nil {
		return nil, err
	}
	prev := b.unlock
	b.unlock = func() { unlockDir(); prev() }
	s.Elector = ha.NewElector(s.Store, ha.Config{Holder: holder, Address: cmp.Or(o.AdvertiseURL, s.URL), TTL: o.LeaseTTL, Clock: o.Clock, Log: o.Log})
	b.api.Role = func() string {
		if !b.settled.Load() {
			return ""
		}
		if s.Elector.Epoch() >= 0 {
			return "leader"
		}
		return "follower"
	}
	return &ha.Forwarder{Elector: s.Elector, Next: next, Auth: b.api.ForwardAuth, Transport: ha.NewTransport(),
		LeaderReads: func(r *http.Request) bool { return r.URL.Path == "/v1/usage" || r.URL.Path == "/v1/invoices" }}, nil
}

// term runs what only the leader runs, until ctx ends: the in-memory
// copy, the clusters' drivers, the meter, the webhooks and the
// controller.
func (b *boot) term(ctx context.Context, epoch int64) {
	o, s := b.o, b.s
	if b.shared {
		b.fenced.SetEpoch(epoch)
		defer b.fenced.SetEpoch(-1)
	}
	// Loaded by the term's first plan; followers read the database.
	b.cached.Enable()
	defer b.cached.Disable()
	// Start the watches of every attached cluster now: the first reclaim
	// of the term must not wait for a full LIST of its pods.
	if clusters, err := s.Store.ListClusters(ctx, ""); err == nil {
		var kubes, slurms []string
		for _, c := range clusters {
			switch {
			case c.KubeAttachedAt.IsZero():
			case c.Type == domain.ClusterSlurm:
				slurms = append(slurms, c.ID)
			default:
				kubes = append(kubes, c.ID)
			}
		}
		s.Kube.Start(ctx, kubes)
		s.Slurm.Start(ctx, slurms)
	} else {
		o.Log.Warn("cannot list clusters to start their Kubernetes drivers; they start on first use", "err", err)
	}
	metered := make(chan struct{})
	go func() { s.Meter.Run(ctx, atLeastReal(time.Minute, 10*time.Second, s.Speed)); close(metered) }()
	logged := make(chan struct{})
	go func() {
		r := worklog.New(b.fenced, b.cached, s.Drivers, s.Clock, o.Log)
		r.Admit, r.Refused = b.api.Quota.Admit, b.api.Quota.Tell
		r.Run(ctx, atLeastReal(WorkEvery, 5*time.Second, s.Speed))
		close(logged)
	}()
	queued := make(chan struct{})
	go func() { b.queues().Run(ctx); close(queued) }()
	hooked := make(chan struct{})
	go func() { s.Webhooks.Run(ctx); close(hooked) }()
	kept := make(chan struct{})
	go func() { b.retention().Run(ctx, retention.DefaultEvery, o.Log.Warn); close(kept) }()
	rolled := make(chan struct{})
	go func() { b.roll(ctx); close(rolled) }()
	counted := make(chan struct{})
	go func() { b.api.Quota.Run(ctx, s.Clock.After, s.Clock.Now, o.Log.Warn); close(counted) }()
	if err := s.Controller.Run(ctx); err != nil {
		o.Log.Error("controller stopped", "err", err)
	}
	<-metered
	<-logged
	<-queued
	<-hooked
	<-kept
	<-rolled
	<-counted
	// A later term starts the watches again, from a fresh LIST.
	s.Drivers.Close()
}

// retention is the term's pruner of the tables that grow with time (see
// internal/retention), on the leader's store.
func (b *boot) retention() *retention.Pruner {
	keep := cmp.Or(b.o.AlertRetention, domain.DefaultAlertRetention)
	usage, spans := b.rawRetention()
	history := cmp.Or(b.o.HistoryRetention, domain.DefaultHistoryRetention)
	p := &retention.Pruner{Store: b.fenced, Clock: b.s.Clock, Pruned: b.s.Metrics.Pruned,
		Rules: []retention.Rule{retention.BudgetAlerts(keep), retention.Usage(usage), retention.WorkSpans(spans), retention.ClusterWork(usage),
			retention.LabelSets(), retention.LostWork(history), retention.NodeHistory(history)}}
	if sz, ok := b.s.Store.(store.Sizer); ok {
		p.Sizer, p.Sizes = sz, b.s.Metrics.TableSizes
	}
	return p
}

// queues is the term's queue integrations (Kueue's admission check, the
// ProvisioningRequest class) for the attached clusters that serve them.
// They talk to real clusters, so they keep real time whatever --speed.
func (b *boot) queues() *manager.Manager {
	o, s := b.o, b.s
	return &manager.Manager{
		Fleet:   &manager.StoreFleet{Store: b.cached, Controller: s.Controller},
		Drivers: s.Kube,
		Options: manager.Options{Tolerations: kube.Tolerations(o.Kube.PreemptibleTaints), Clock: o.Clock,
			Log: o.Log, Refused: s.Controller.RecordAccess, Note: s.Controller.RecordNote},
	}
}

// serve runs the terms (the election's, or one for as long as the
// process runs), the token-use recorder and the HTTP server, and closes
// everything down when the server stops.
func (b *boot) serve(ctx context.Context) {
	s := b.s
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go func() {
		errc := make(chan error, 1)
		termsDone := make(chan struct{})
		usesDone := make(chan struct{})
		go func() { b.api.RunTokenUses(runCtx, 10*time.Second); close(usesDone) }()
		if s.Elector != nil {
			go func() { s.Elector.Run(runCtx, b.term); close(termsDone) }()
			go followEvents(runCtx, b.o.Clock, s.Store, s.Elector, s.Controller)
		} else {
			go func() { b.term(runCtx, 0); close(termsDone) }()
		}
		go func() {
			if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
				return
			}
			errc <- nil
		}()
		var err error
		served := false
		select {
		case err = <-errc:
			served = true
		case <-runCtx.Done():
		}
		stop()
		b.shutdown()
		if !served {
			err = <-errc
		}
		<-termsDone
		<-usesDone // before the store closes
		b.api.CloseSimulations()
		b.closeMachines()
		s.Drivers.Close()
		s.Store.Close()
		b.unlock()
		s.done <- err
	}()
}

// shutdown stops the HTTP servers, giving requests in flight 5 s.
func (b *boot) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	b.s.http.Shutdown(ctx)
	cancel()
	for _, srv := range b.side {
		srv.Close()
	}
}

// settle waits, on PostgreSQL, for the first campaign and, if it won, for
// the term to fence this server's writes with its epoch, so the first
// requests are answered as leader or follower, not in between.
func (b *boot) settle() {
	s, wall := b.s, b.o.Clock
	if s.Elector == nil {
		return
	}
	wait := wall.After(5 * time.Second)
	for {
		select {
		case <-wait:
			b.settled.Store(true)
			return
		case <-s.Elector.Tried():
			if e := s.Elector.Epoch(); e < 0 || b.fenced.Epoch() == e {
				b.settled.Store(true)
				return
			}
			<-wall.After(5 * time.Millisecond)
		}
	}
}

// WorkEvery is how often the work on each node is recorded for cost
// allocation (worklog): a span's end is known to this much.
const WorkEvery = 30 * time.Second
