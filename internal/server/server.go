// Package server is the one wiring point of the sparecap process: it opens
// the store, registers the fleet, builds the clock, the drivers, the
// controller and the API, and serves them.
package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/console"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/guard"
	"github.com/sparecap/sparecap/internal/ha"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/metrics"
	"github.com/sparecap/sparecap/internal/provider/exechook"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// Options configure a server. Zero values take the defaults.
type Options struct {
	// Addr to listen on (default 127.0.0.1:8407; port 0 picks a free one).
	Addr string
	// DB is a postgres:// URL or a SQLite file path (default: DataDir/sparecap.db).
	DB string
	// DataDir holds the SQLite file, the simulator's state, the clock anchor
	// and the generated admin token (default: $XDG_DATA_HOME/sparecap or
	// ~/.local/share/sparecap).
	DataDir string
	// FleetFile is a fleet YAML file; empty uses the built-in fleet.
	FleetFile string
	// AdminToken; empty reads DataDir/admin-token, generating it on first
	// start.
	AdminToken string
	// SecretKeyFile, if set, is the key kubeconfigs are sealed with (it
	// must exist; every replica sharing a database needs the same one).
	// Empty: DataDir/secret.key, created on first start.
	SecretKeyFile string
	// ConfigPath, if set, is the CLI config file written on first start
	// with this server's URL and admin token (not overwritten later).
	ConfigPath string
	// Speed runs the clock this many times faster than real time.
	Speed float64
	// DrainWindow, Cooldown: see controller.Config.
	DrainWindow time.Duration
	Cooldown    time.Duration
	// ProvisionTime and WipeTime of the simulated machines.
	ProvisionTime time.Duration
	WipeTime      time.Duration
	// PreemptibleDiscount in percent (default "50").
	PreemptibleDiscount string
	// SimSeed varies the simulated pods' behaviour.
	SimSeed int64
	// SimPods overrides the simulated pods (nil: the default profiles).
	SimPods []sim.PodTemplate
	// MachineProvider: "sim" (default: simulated machines), "register"
	// (nothing to boot; attached clusters get their Node objects created
	// and marked Ready) or "exec" (ProvisionHook is run for every machine).
	MachineProvider string
	// ProvisionHook and its arguments, and how long one run may take
	// (MachineProvider "exec").
	ProvisionHook        string
	ProvisionHookArgs    []string
	ProvisionHookTimeout time.Duration
	// ProvisionHookEnv holds KEY=VALUE entries added to the hook's
	// otherwise minimal environment (exechook.Config.Env).
	ProvisionHookEnv []string
	// Kube configures the drivers of attached clusters (rate limits, call
	// timeout, labels and taints for nodes).
	Kube kube.Options
	// AllowKubeconfigPlugins accepts kubeconfigs with exec credential
	// plugins, auth-providers or proxy-urls (kube.CheckKubeconfig), which
	// run commands on this host with the server's environment or send a
	// cluster's traffic elsewhere. Off by default.
	AllowKubeconfigPlugins bool
	// Workers bounds the node steps running at once, NoticeWorkers those
	// delivering drain notices (controller.Config).
	Workers, NoticeWorkers int
	// NodeLostAfter and RegisterTimeout: see controller.Config.
	NodeLostAfter   time.Duration
	RegisterTimeout time.Duration
	// AdvertiseURL is where other servers reach this one's API, to
	// forward writes to it while it leads (default: the URL it listens
	// on). Only a server on PostgreSQL campaigns for leadership.
	AdvertiseURL string
	// LeaseTTL is how long a leader's lease lasts unless renewed: about
	// how long a dead leader keeps the others waiting (default 3s).
	LeaseTTL time.Duration
	// PprofAddr, if set, is where Go's profiling endpoints
	// (/debug/pprof/) are served, apart from the API and without
	// authentication: keep it on loopback.
	PprofAddr string
	// Limits are the listener's timeouts, caps and rate limits.
	Limits Limits
	// MetricsAddr, if set, is where /metrics is served, on a listener of
	// its own and no longer on the API's. MetricsToken, if set, is the
	// bearer token a scrape of /metrics must carry, wherever it is
	// served (the metrics name projects and clusters).
	MetricsAddr, MetricsToken string
	Log                       *slog.Logger
}

// Limits keep one client from taking what the server has. Zero timeouts
// and caps take the defaults below; a zero rate is no limit (the
// command's flags carry the defaults for those).
type Limits struct {
	// ReadTimeout bounds reading one request, body included (event
	// streams lift it); WriteTimeout writing one response (streams move
	// it on as they write); IdleTimeout how long a kept-alive connection
	// may wait for its next request.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConnections caps the connections open at once; more wait to be
	// accepted.
	MaxConnections int
	// MaxStreamsPerToken caps the event streams open at once per token.
	MaxStreamsPerToken int
	// TokenRate and AddressRate are requests a second per token and per
	// client address (bursts of twice that); AuthFailures is failed
	// authentications a minute per client address, after which the
	// address is refused outright until they refill.
	TokenRate, AddressRate float64
	AuthFailures           int
	// TrustedProxies are addresses or CIDR prefixes of reverse proxies
	// (and the other replicas, which forward writes) whose
	// X-Forwarded-For names the client.
	TrustedProxies []string
}

// The defaults of Limits.
const (
	DefaultReadTimeout        = 30 * time.Second
	DefaultWriteTimeout       = 2 * time.Minute
	DefaultIdleTimeout        = 2 * time.Minute
	DefaultMaxConnections     = 1024
	DefaultMaxStreamsPerToken = 16
	// The request bodies the API and the console take.
	maxAPIBody  = 1 << 20
	maxFormBody = 64 << 10
)

// Server is a running sparecap process.
type Server struct {
	URL        string
	AdminToken string
	Store      store.Store
	Controller *controller.Controller
	Meter      *metering.Meter
	Metrics    *metrics.Metrics
	Sim        *sim.Fleet
	// Kube routes each cluster's calls to its attached API server or to
	// the simulation.
	Kube  *kube.Router
	Clock clock.Clock
	// Speed of the clock relative to real time.
	Speed float64
	Fleet fleet.File
	// Elector runs leader election on PostgreSQL; nil on SQLite, where the
	// one server always leads.
	Elector *ha.Elector
	// PprofURL is where the profiling endpoints are served ("" if off).
	PprofURL string
	// MetricsURL is where /metrics is served: the API's URL unless
	// Options.MetricsAddr moved it.
	MetricsURL string

	http *http.Server
	ln   net.Listener
	stop context.CancelFunc
	done chan error
}

// DefaultDataDir is where state lives when --data-dir is not given.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "sparecap")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "sparecap")
	}
	return "sparecap-data"
}

// Start opens everything and starts serving; Wait or Close ends it.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8407"
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir()
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// The data directory holds the database, the kubeconfig sealing key
	// and the admin token: nobody else may read it.
	if err := tighten(o.DataDir, o.Log); err != nil {
		return nil, err
	}
	f := fleet.Default()
	if o.FleetFile != "" {
		var err error
		if f, err = fleet.Load(o.FleetFile); err != nil {
			return nil, err
		}
	}
	clk, err := loadClock(filepath.Join(o.DataDir, "clock.json"), o.Speed)
	if err != nil {
		return nil, err
	}
	st, unlock, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &Server{Store: st, Clock: clk, Speed: max(o.Speed, 1), Fleet: f, done: make(chan error, 1)}
	fail := func(err error) (*Server, error) {
		st.Close()
		unlock()
		return nil, err
	}
	// What writes only while this server leads goes through fenced: on
	// PostgreSQL its commits carry the term's epoch (none are allowed
	// before the first term); on SQLite this server alone uses the file
	// (see lockFile) and leads for as long as it runs.
	shared := isPostgres(o.DB)
	fenced := store.NewFenced(st)
	if shared {
		fenced.SetEpoch(-1)
	}
	// While this server leads, the world the controller plans on is kept
	// in memory, written through (see store.Cached).
	cached := store.NewCached(fenced)
	if _, err := fleet.Register(ctx, st, f, clk.Now()); err != nil {
		return fail(fmt.Errorf("register fleet: %w", err))
	}
	if o.PreemptibleDiscount == "" {
		o.PreemptibleDiscount = "50"
	}
	if err := fleet.RegisterPrices(ctx, st, f, o.PreemptibleDiscount, clk.Now()); err != nil {
		return fail(fmt.Errorf("register prices: %w", err))
	}
	s.Sim, err = sim.New(sim.Config{Clock: clk, ProvisionTime: o.ProvisionTime, WipeTime: o.WipeTime, Seed: o.SimSeed,
		Pods: o.SimPods, StatePath: filepath.Join(o.DataDir, "sim-state.json")})
	if err != nil {
		return fail(err)
	}
	if s.AdminToken, err = adminToken(o); err != nil {
		return fail(err)
	}
	interval := time.Second
	if o.Speed > 1 {
		// Poll about 10 times a wall second whatever the speed.
		interval = time.Duration(float64(100*time.Millisecond) * o.Speed)
	}
	// Kubeconfigs are sealed with a key kept in the data dir, apart from
	// the database (which may be a shared PostgreSQL).
	var sealer *secret.Sealer
	if o.SecretKeyFile != "" {
		sealer, err = secret.LoadKey(o.SecretKeyFile)
	} else {
		sealer, err = secret.LoadOrCreateKey(filepath.Join(o.DataDir, "secret.key"))
	}
	if err != nil {
		return fail(err)
	}
	kopts := o.Kube
	kopts.Log, kopts.Clock = o.Log, clk
	kopts.AllowKubeconfigPlugins = o.AllowKubeconfigPlugins
	kopts.RegisterNodes = o.MachineProvider == "register"
	// client-go logs through klog (a watch that lost its API server, say):
	// send that to the server's log rather than bare to stderr.
	klog.SetSlogLogger(o.Log.With("component", "client-go"))
	s.Kube = kube.NewRouter(func(ctx context.Context, id string) ([]byte, error) {
		sealed, err := st.GetKubeconfig(ctx, id)
		if err != nil || sealed == nil {
			return nil, err
		}
		return sealer.Open(sealed, id)
	}, s.Sim, kopts)
	machines, closeMachines, err := machineProvider(o, s)
	if err != nil {
		return fail(err)
	}
	s.Controller = controller.New(cached, s.Kube, machines, clk, controller.Config{
		DrainWindow: o.DrainWindow, Cooldown: o.Cooldown, Interval: interval, Workers: o.Workers, NoticeWorkers: o.NoticeWorkers,
		NodeLostAfter: o.NodeLostAfter, RegisterTimeout: o.RegisterTimeout,
		SweepEvery: atLeastReal(time.Minute, 10*time.Second, s.Speed),
	}, o.Log)
	s.Controller.OnClusterGone = s.Kube.Reload
	s.Metrics = metrics.New(cached)
	s.Controller.Observer = s.Metrics.Observe
	// The meter writes only usage records, none of the snapshot's rows:
	// its long transactions need not wait for the copy's writers.
	s.Meter = metering.New(fenced, clk, o.Log)
	s.Meter.Reads = cached
	s.Meter.Refresh = atLeastReal(metering.DefaultRefresh, time.Minute, s.Speed)
	s.Meter.OnBilled = s.Metrics.AddBilledGPUSeconds
	// Operator tokens live in the store; the configured (or generated)
	// one starts things off when the store has none.
	active, err := api.BootstrapOperator(ctx, st, s.AdminToken, time.Now())
	if err != nil {
		return fail(fmt.Errorf("admin token: %w", err))
	}
	if !active {
		o.Log.Warn("the configured admin token (SPARECAP_ADMIN_TOKEN, or the data directory's admin-token) is not an active operator token: operators rotated or revoked it; sign in with a current operator token (sparecap tokens list shows them)")
	}
	apiHandler := api.New(cached, s.Controller, clk, o.Log)
	apiHandler.Meter = leaderMeter{s}
	apiHandler.Sealer = sealer
	apiHandler.AllowKubeconfigPlugins = o.AllowKubeconfigPlugins
	register := o.MachineProvider == "register"
	apiHandler.CheckAccess = func(ctx context.Context, kubeconfig []byte) (domain.Access, error) {
		return kube.CheckKubeconfigAccess(ctx, kubeconfig, register, cmp.Or(o.Kube.Timeout, kube.DefaultTimeout), clk.Now())
	}
	apiHandler.OnKubeconfig = func(id string) {
		s.Kube.Reload(id)
		s.Controller.Kick()
	}
	sessions := console.NewSessions()
	apiHandler.Sessions = sessions
	lim := o.Limits
	trusted, err := guard.ParsePrefixes(lim.TrustedProxies)
	if err != nil {
		return fail(fmt.Errorf("trusted proxies: %w", err))
	}
	addrs := guard.Addrs{Trusted: trusted}
	apiHandler.Addrs = addrs
	apiHandler.PerToken = guard.NewLimiter(lim.TokenRate, int(2*lim.TokenRate))
	apiHandler.AuthFailures = guard.NewLimiter(float64(lim.AuthFailures)/60, lim.AuthFailures)
	apiHandler.MaxStreams = cmp.Or(lim.MaxStreamsPerToken, DefaultMaxStreamsPerToken)
	var instrumented http.Handler = s.Metrics.Middleware(apiHandler)
	s.ln, err = net.Listen("tcp", o.Addr)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", o.Addr, err))
	}
	s.ln = netutil.LimitListener(s.ln, cmp.Or(lim.MaxConnections, DefaultMaxConnections))
	s.URL = "http://" + s.ln.Addr().String()
	var settled atomic.Bool // the first campaign is over (see below)
	if shared {
		// The lease holder's name is the data directory's, which this
		// process locks: a server restarted after a crash takes its own
		// lease back at once instead of waiting for it to expire.
		holder, unlockDir, err := serverID(o.DataDir)
		if err != nil {
			return fail(err)
		}
		prev := unlock
		unlock = func() { unlockDir(); prev() }
		s.Elector = ha.NewElector(st, ha.Config{Holder: holder, Address: cmp.Or(o.AdvertiseURL, s.URL), TTL: o.LeaseTTL, Log: o.Log})
		apiHandler.Role = func() string {
			if !settled.Load() {
				return ""
			}
			if s.Elector.Epoch() >= 0 {
				return "leader"
			}
			return "follower"
		}
		// Followers serve reads and forward writes to the leader.
		// Usage and invoices too, while a leader answers: it meters to the
		// second; what is stored lags by up to the meter's Refresh.
		instrumented = &ha.Forwarder{Elector: s.Elector, Next: instrumented, Auth: apiHandler.ForwardAuth, Transport: ha.NewTransport(),
			LeaderReads: func(r *http.Request) bool { return r.URL.Path == "/v1/usage" || r.URL.Path == "/v1/invoices" }}
	}
	handler := http.NewServeMux()
	metricsHandler := metricsAuth(s.Metrics.Handler(), o.MetricsToken)
	if o.MetricsAddr == "" {
		handler.Handle("GET /metrics", metricsHandler)
		if o.MetricsToken == "" {
			o.Log.Warn("/metrics is served on the API's listener without authentication, and names projects and clusters; set --metrics-addr or SPARECAP_METRICS_TOKEN")
		}
	}
	con := console.New(instrumented, sessions, clk, o.Log)
	con.Speed = s.Speed
	handler.Handle("/console/", con)
	handler.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	handler.Handle("/", instrumented)

	if o.ConfigPath != "" {
		if err := writeClientConfig(o.ConfigPath, s.URL, s.AdminToken); err != nil {
			s.ln.Close()
			return fail(err)
		}
	}
	guarded := guard.Handler(handler, guard.Options{
		Addrs:   addrs,
		MaxBody: maxAPIBody,
		MaxBodyFor: func(r *http.Request) int64 {
			if strings.HasPrefix(r.URL.Path, "/console/") {
				return maxFormBody // sign-in and cluster forms
			}
			return maxAPIBody
		},
		PerAddress: guard.NewLimiter(lim.AddressRate, int(2*lim.AddressRate)),
		Exempt:     func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" },
		Reject:     api.Reject,
	})
	s.http = &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:    cmp.Or(lim.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:   cmp.Or(lim.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:    cmp.Or(lim.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes: 64 << 10,
	}
	s.MetricsURL = s.URL
	var metricsSrv *http.Server
	if o.MetricsAddr != "" {
		mln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			s.ln.Close()
			return fail(fmt.Errorf("listen on %s for metrics: %w", o.MetricsAddr, err))
		}
		s.MetricsURL = "http://" + mln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler)
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: DefaultReadTimeout,
			WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout}
		go metricsSrv.Serve(netutil.LimitListener(mln, 64))
	}
	var pprofSrv *http.Server
	if o.PprofAddr != "" {
		pln, err := net.Listen("tcp", o.PprofAddr)
		if err != nil {
			s.ln.Close()
			return fail(fmt.Errorf("listen on %s for profiling: %w", o.PprofAddr, err))
		}
		s.PprofURL = "http://" + pln.Addr().String()
		// Where the plan lock and the store's write lock are waited for
		// (/debug/pprof/mutex): one contended unlock in ten is sampled.
		runtime.SetMutexProfileFraction(10)
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		pprofSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go pprofSrv.Serve(pln)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	// term runs what only the leader runs, until ctx ends.
	term := func(ctx context.Context, epoch int64) {
		if shared {
			fenced.SetEpoch(epoch)
			defer fenced.SetEpoch(-1)
		}
		// Loaded by the term's first plan; followers read the database.
		cached.Enable()
		defer cached.Disable()
		// Start the watches of every attached cluster now: the first
		// reclaim of the term must not wait for a full LIST of its pods.
		if clusters, err := st.ListClusters(ctx, ""); err == nil {
			var attached []string
			for _, c := range clusters {
				if !c.KubeAttachedAt.IsZero() {
					attached = append(attached, c.ID)
				}
			}
			s.Kube.Start(ctx, attached)
		} else {
			o.Log.Warn("cannot list clusters to start their Kubernetes drivers; they start on first use", "err", err)
		}
		metered := make(chan struct{})
		go func() { s.Meter.Run(ctx, atLeastReal(time.Minute, 10*time.Second, s.Speed)); close(metered) }()
		if err := s.Controller.Run(ctx); err != nil {
			o.Log.Error("controller stopped", "err", err)
		}
		<-metered
		// A later term starts the watches again, from a fresh LIST.
		s.Kube.Close()
	}
	s.stop = stop
	go func() {
		errc := make(chan error, 1)
		termsDone := make(chan struct{})
		usesDone := make(chan struct{})
		go func() { apiHandler.RunTokenUses(runCtx, 10*time.Second); close(usesDone) }()
		if s.Elector != nil {
			go func() { s.Elector.Run(runCtx, term); close(termsDone) }()
			go followEvents(runCtx, st, s.Elector, s.Controller)
		} else {
			go func() { term(runCtx, 0); close(termsDone) }()
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
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.http.Shutdown(shutdownCtx)
		cancel()
		if pprofSrv != nil {
			pprofSrv.Close()
		}
		if metricsSrv != nil {
			metricsSrv.Close()
		}
		if !served {
			err = <-errc
		}
		<-termsDone
		<-usesDone // before the store closes
		closeMachines()
		s.Kube.Close()
		st.Close()
		unlock()
		s.done <- err
	}()
	if s.Elector != nil {
		// Answer the first requests as leader or follower, not in between:
		// wait for the first campaign and, if it won, for the term to fence
		// this server's writes with its epoch.
		wait := time.After(5 * time.Second)
	settle:
		for {
			select {
			case <-wait:
				break settle
			case <-s.Elector.Tried():
				if e := s.Elector.Epoch(); e < 0 || fenced.Epoch() == e {
					break settle
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		settled.Store(true)
	}
	o.Log.Info("sparecap server started", "url", s.URL, "data_dir", o.DataDir, "speed", max(o.Speed, 1), "machines", countMachines(f))
	return s, nil
}

// machineProvider builds the provider Options.MachineProvider names, and
// what stops it.
func machineProvider(o Options, s *Server) (driver.MachineProvider, func(), error) {
	switch o.MachineProvider {
	case "", "sim":
		return s.Sim, func() {}, nil
	case "register":
		// The registrar posts its nodes' heartbeats until the server stops.
		r := kube.NewRegistrar(s.Kube, s.Sim)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		return r, func() { cancel(); <-done }, nil
	case "exec":
		if o.ProvisionHook == "" {
			return nil, nil, errors.New("the exec machine provider needs a provision hook (--provision-hook)")
		}
		p, err := exechook.New(exechook.Config{Program: o.ProvisionHook, Args: o.ProvisionHookArgs,
			Timeout: o.ProvisionHookTimeout, Env: o.ProvisionHookEnv, Log: o.Log})
		if err != nil {
			return nil, nil, err
		}
		return p, func() { p.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown machine provider %q (want sim, register or exec)", o.MachineProvider)
}

func countMachines(f fleet.File) int {
	n := 0
	for _, p := range f.Pools {
		n += p.Machines
	}
	return n
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	s.stop()
	return <-s.done
}

// Wait blocks until ctx ends, then stops the server.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return s.Close()
	case err := <-s.done:
		return err
	}
}

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openStore opens the database. A SQLite file is locked for this server
// alone (unlock releases it): two servers on one file would each plan as
// if they were the only one.
func openStore(ctx context.Context, o Options) (st store.Store, unlock func(), err error) {
	db := o.DB
	switch {
	case isPostgres(db):
		st, err := postgres.Open(ctx, db)
		if err != nil {
			return nil, nil, fmt.Errorf("open PostgreSQL: %w", err)
		}
		return st, func() {}, nil
	case db == "":
		db = filepath.Join(o.DataDir, "sparecap.db")
	default:
		db = strings.TrimPrefix(db, "sqlite://")
	}
	unlock, err = lockFile(db+".lock", "another sparecap server is using this SQLite database: "+
		"SQLite serves one server only; stop the other one, give this one another --data-dir or --db, "+
		"or run several servers on PostgreSQL")
	if err != nil {
		return nil, nil, err
	}
	st, err = sqlite.Open(ctx, db)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("open SQLite %s: %w", db, err)
	}
	// The database holds token hashes and tenants' data: owner only, like
	// the rest of the data dir.
	if err := os.Chmod(db, 0o600); err != nil {
		st.Close()
		unlock()
		return nil, nil, fmt.Errorf("restrict SQLite file %s: %w", db, err)
	}
	return st, unlock, nil
}

// loadClock returns the process clock. A sped-up clock is anchored in a
// file so a restart continues the same timeline: deadlines stored before a
// crash still fall at the same moment of simulated time.
func loadClock(path string, speed float64) (clock.Clock, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if speed <= 1 {
			return clock.Real{}, nil
		}
		now := time.Now()
		c := clock.NewAnchored(clock.Anchor{Speed: speed, Virtual: now.UTC(), Real: now})
		return c, writeAtomic(path, c.Anchor())
	case err != nil:
		return nil, fmt.Errorf("read clock anchor: %w", err)
	}
	var a clock.Anchor
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("clock anchor %s: %w", path, err)
	}
	c := clock.NewAnchored(a)
	if max(speed, 1) == c.Speed {
		return c, nil
	}
	// A new speed: re-anchor at the current simulated time.
	now := time.Now()
	c = clock.NewAnchored(clock.Anchor{Speed: max(speed, 1), Virtual: c.Now(), Real: now})
	return c, writeAtomic(path, c.Anchor())
}

func writeAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// adminToken takes the token from the options, else from the data dir,
// generating and saving one (mode 0600) on first start.
func adminToken(o Options) (string, error) {
	if o.AdminToken != "" {
		return o.AdminToken, nil
	}
	path := filepath.Join(o.DataDir, "admin-token")
	data, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(data)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	t := api.NewToken()
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save admin token: %w", err)
	}
	return t, nil
}

// writeClientConfig writes the CLI's config on first start only, so a
// user's own settings are never overwritten.
func writeClientConfig(path, url, token string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := client.WriteConfig(path, client.Config{URL: url, Token: token}); err != nil {
		return fmt.Errorf("write CLI config: %w", err)
	}
	return nil
}

// leaderMeter cuts usage before a usage query only while this server
// leads: only the leader meters (a follower serves what is stored).
type leaderMeter struct{ s *Server }

func (m leaderMeter) Cut(ctx context.Context) error {
	if m.s.Elector != nil && m.s.Elector.Epoch() < 0 {
		return nil
	}
	return m.s.Meter.Cut(ctx)
}

// atLeastReal is d of clock time, but at least real of real time on a
// clock running speed times faster: for background work whose cost
// follows the fleet, not what changed (the meter's pass and its refresh
// of running records, the backstop sweep), which a fast clock would
// otherwise repeat many times a real second.
func atLeastReal(d, real time.Duration, speed float64) time.Duration {
	return max(d, time.Duration(float64(real)*speed))
}

// tighten takes group and other access away from dir and every file in
// it (0755 becomes 0700, 0644 0600), warning about each it had to change:
// an existing data directory may have been made by hand or by an older
// version with the umask's modes.
func tighten(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if err := os.Chmod(dir, mode&^0o077); err != nil {
			return fmt.Errorf("data dir %s is open to others (mode %04o) and cannot be tightened: %w", dir, mode, err)
		}
		log.Warn("data directory was open to others; tightened to its owner only", "dir", dir, "was", fmt.Sprintf("%04o", mode), "now", fmt.Sprintf("%04o", mode&^0o077))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone since the listing
		}
		if mode := info.Mode().Perm(); mode&0o077 != 0 {
			path := filepath.Join(dir, e.Name())
			if err := os.Chmod(path, mode&^0o077); err != nil {
				return fmt.Errorf("%s is open to others (mode %04o) and cannot be tightened: %w", path, mode, err)
			}
			log.Warn("file in the data directory was open to others; tightened to its owner only", "file", path, "was", fmt.Sprintf("%04o", mode), "now", fmt.Sprintf("%04o", mode&^0o077))
		}
	}
	return nil
}

// metricsAuth asks for token as a bearer token on every scrape, if it is
// set.
func metricsAuth(next http.Handler, token string) http.Handler {
	if token == "" {
		return next
	}
	want := api.HashToken(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || len(got) > api.MaxTokenLen ||
			subtle.ConstantTimeCompare([]byte(api.HashToken(strings.TrimSpace(got))), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sparecap metrics"`)
			api.Reject(w, r, http.StatusUnauthorized, apiv1.CodeUnauthorized, "/metrics needs the metrics token: Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}
