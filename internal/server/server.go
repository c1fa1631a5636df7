// Package server is the one wiring point of the sparecap process: it opens
// the store, registers the fleet, builds the clock, the drivers, the
// controller and the API, and serves them.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/ha"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/metrics"
	"github.com/sparecap/sparecap/internal/provider/exechook"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/sqlite"
	"github.com/sparecap/sparecap/internal/store/sqlstore"
	"github.com/sparecap/sparecap/internal/webhook"
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
	// Clock is the real clock, the one the whole server runs on (default
	// clock.Real{}): what is wall time whatever Speed (tokens, sockets,
	// webhooks, the election, the queue integrations) reads it, and
	// Server.Clock is it, or runs Speed times faster than it.
	Clock clock.Clock
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
	// Slurm configures the drivers of SLURM clusters (poll, timeouts).
	Slurm slurm.Options
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
	// AlertRetention is how long budget alerts are kept (0: the default,
	// domain.DefaultAlertRetention; negative: for ever).
	AlertRetention time.Duration
	// UsageRetention and SpanRetention are how long raw usage records
	// and work spans are kept once their months are rolled up (0: the
	// defaults, domain.DefaultUsageRetention and DefaultSpanRetention;
	// negative: for ever).
	UsageRetention, SpanRetention time.Duration
	// HistoryRetention is how long the lost-work ledger and the removed
	// nodes' history are kept (0: domain.DefaultHistoryRetention;
	// negative: for ever).
	HistoryRetention time.Duration
	// StorageQuota is a project's storage quota in bytes when the
	// operator set it none of its own (0: domain.DefaultStorageQuota).
	StorageQuota int64
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
	// WebhookAllow are the prefixes of addresses webhook deliveries may
	// reach although the policy refuses them (loopback, private, link-local
	// …): --webhook-allow-cidr.
	WebhookAllow []netip.Prefix
	// WebhookMaxPending bounds the deliveries an endpoint may have
	// pending (webhook.Config.MaxPending).
	WebhookMaxPending int
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
	// MaxConnections caps the connections served at once, and
	// MaxConnectionsPerAddress those of one client address (default:
	// an eighth of MaxConnections; reverse proxies and replicas in
	// TrustedProxies are not held to it). Past either, a connection is
	// answered at once: /healthz and /readyz served, anything else
	// refused (guard.ConnLimits).
	MaxConnections, MaxConnectionsPerAddress int
	// MaxStreamsPerProject caps the event streams open at once per
	// project, whatever its tokens (per token for operators).
	MaxStreamsPerProject int
	// MaxTokensPerProject caps a project's active tokens;
	// TokenMintsPerMinute is how many a project may mint (create or
	// rotate) a minute, in bursts of as many (0: no limit).
	MaxTokensPerProject int
	TokenMintsPerMinute float64
	// BudgetWritesPerMinute is how many budget creates and deletes a
	// project may make a minute, in bursts of as many (0: no limit).
	BudgetWritesPerMinute float64
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
	DefaultReadTimeout           = 30 * time.Second
	DefaultWriteTimeout          = 2 * time.Minute
	DefaultIdleTimeout           = 2 * time.Minute
	DefaultMaxConnections        = 1024
	DefaultMaxStreamsPerProject  = 16
	DefaultMaxTokensPerProject   = 100
	DefaultTokenMintsPerMinute   = 10
	DefaultBudgetWritesPerMinute = 10
	// overflowConnections are accepted past the limits to be answered at
	// once (health probes, refusals) and closed.
	overflowConnections = 64
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
	// Drivers routes each cluster's calls by its type to Kube or Slurm,
	// and to the simulation when nothing is attached to the cluster.
	Drivers *driver.Router
	// Kube drives the Kubernetes clusters with a kubeconfig attached.
	Kube *kube.Platform
	// Slurm drives the SLURM clusters with a slurm.conf attached.
	Slurm *slurm.Platform
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
	// Webhooks dispatches lifecycle events to webhook endpoints and
	// delivers them, while this server leads.
	Webhooks *webhook.Service

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

// machineProvider builds the provider Options.MachineProvider names, and
// what stops it.
func machineProvider(o Options, s *Server) (driver.MachineProvider, func(), error) {
	switch o.MachineProvider {
	case "", "sim":
		return s.Sim, func() {}, nil
	case "register":
		// The registrar posts its nodes' heartbeats until the server stops.
		r := kube.NewRegistrar(s.Kube, s.Sim)
		r.Wall, r.Log = o.Clock, o.Log
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		return r, func() { cancel(); <-done }, nil
	case "exec":
		if o.ProvisionHook == "" {
			return nil, nil, errors.New("the exec machine provider needs a provision hook (--provision-hook)")
		}
		p, err := exechook.New(exechook.Config{Program: o.ProvisionHook, Args: o.ProvisionHookArgs,
			Timeout: o.ProvisionHookTimeout, Env: o.ProvisionHookEnv, Log: o.Log, Clock: o.Clock})
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
		st, err := postgres.OpenWith(ctx, db, sqlstore.Options{Clock: o.Clock})
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
	st, err = sqlite.OpenWith(ctx, db, sqlstore.Options{Clock: o.Clock})
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

// loadClock returns the process clock: wall, or a clock running speed
// times faster than it. A sped-up clock is anchored in a file so a restart
// continues the same timeline: deadlines stored before a crash still fall
// at the same moment of simulated time.
func loadClock(path string, speed float64, wall clock.Clock) (clock.Clock, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if speed <= 1 {
			return wall, nil
		}
		now := wall.Now()
		c := clock.NewAnchoredOn(clock.Anchor{Speed: speed, Virtual: now.UTC(), Real: now}, wall)
		return c, writeAtomic(path, c.Anchor())
	case err != nil:
		return nil, fmt.Errorf("read clock anchor: %w", err)
	}
	var a clock.Anchor
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("clock anchor %s: %w", path, err)
	}
	c := clock.NewAnchoredOn(a, wall)
	if max(speed, 1) == c.Speed {
		return c, nil
	}
	// A new speed: re-anchor at the current simulated time.
	now := wall.Now()
	c = clock.NewAnchoredOn(clock.Anchor{Speed: max(speed, 1), Virtual: c.Now(), Real: now}, wall)
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
