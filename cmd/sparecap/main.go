// Command sparecap is the sparecap server, its demo and its CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/cli"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/demo"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/guard"
	"github.com/sparecap/sparecap/internal/ha"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/server"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/webhook"
)

func main() {
	// The process's one real clock: the commands pass it down to whatever
	// they run (the CLI's commands take theirs from cli's environment).
	wall := clock.Real{}
	root := cli.NewRoot(serverCmd(wall), demoCmd(wall), runCmd(wall), trainerCmd(wall))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// serverArgs holds the server's flags that are parsed into server.Options
// only when the command runs.
type serverArgs struct {
	nodeLabels, nodeTaints, preemptibleTaints, hookEnv, webhookAllow []string
	logLevel                                                         string
}

func serverCmd(wall clock.Clock) *cobra.Command {
	o := server.Options{Clock: wall}
	var a serverArgs
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the sparecap control plane (API, controller, simulated fleet)",
		Long: `Run the sparecap control plane: the REST API under /v1, the controller that
fills preemptible targets and drains reclaimed nodes, and the simulated fleet.

With no flags it keeps its state in a SQLite file under the data directory,
uses a built-in fleet (4 regions, 4 GPU types, an on-demand pool and idle
reservations) and listens on 127.0.0.1:8407. On first start it generates an
admin token (or takes SPARECAP_ADMIN_TOKEN) and writes the CLI config file
with this server's URL and that token, so the CLI works at once.`,
		Example: `  sparecap server
  sparecap server --speed 60 --drain-window 5m
  sparecap server --db postgres://user@127.0.0.1:5432/sparecap --fleet fleet.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server.SetProcs(os.Getenv("GOMAXPROCS"))
			if err := serverOptions(cmd, &o, a); err != nil {
				return err
			}
			return serve(cmd, o)
		},
	}
	serverFlags(cmd, &o, &a)
	guardFlags(cmd, &o, &a)
	return cmd
}

// serverOptions checks the flags and completes o from them and the
// environment.
func serverOptions(cmd *cobra.Command, o *server.Options, a serverArgs) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if o.Speed < 1 {
		return fmt.Errorf("--speed must be at least 1; got %g", o.Speed)
	}
	if o.LeaseTTL < time.Second {
		return fmt.Errorf("--lease-ttl must be at least 1s; got %s", o.LeaseTTL)
	}
	if o.DrainWindow < time.Second {
		return fmt.Errorf("--drain-window must be at least 1s; got %s", o.DrainWindow)
	}
	if o.Cooldown == 0 {
		o.Cooldown = -1 // the controller reads 0 as "default"
	}
	if err := kubeFlags(o, a.nodeLabels, a.nodeTaints, a.preemptibleTaints); err != nil {
		return err
	}
	if err := provisionHookEnv(o, a.hookEnv); err != nil {
		return err
	}
	if err := limitFlags(o.Limits); err != nil {
		return err
	}
	allow, err := webhook.ParseAllow(a.webhookAllow)
	if err != nil {
		return fmt.Errorf("--webhook-allow-cidr: %w", err)
	}
	o.WebhookAllow = allow
	o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	o.AdminToken = os.Getenv("SPARECAP_ADMIN_TOKEN")
	o.MetricsToken = os.Getenv("SPARECAP_METRICS_TOKEN")
	if o.MetricsToken != "" && len(o.MetricsToken) < 32 {
		return fmt.Errorf("SPARECAP_METRICS_TOKEN must be at least 32 characters; got %d", len(o.MetricsToken))
	}
	if cfg, _ := cmd.Flags().GetString("config"); cfg != "" {
		o.ConfigPath = cfg
	} else {
		o.ConfigPath = client.DefaultConfigPath()
	}
	return nil
}

// serve starts the server and runs it until the command's context ends.
func serve(cmd *cobra.Command, o server.Options) error {
	srv, err := server.Start(cmd.Context(), o)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "sparecap server listening on %s (data in %s)\nCLI config: %s\n", srv.URL, dataDir(o), o.ConfigPath)
	if err := srv.Wait(cmd.Context()); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serverFlags defines what the server runs and how it drives clusters and
// machines.
func serverFlags(cmd *cobra.Command, o *server.Options, a *serverArgs) {
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "127.0.0.1:8407", "address to listen on")
	f.StringVar(&o.DB, "db", "", "database: a postgres:// URL, or a SQLite file path (default <data-dir>/sparecap.db)")
	f.StringVar(&o.DataDir, "data-dir", server.DefaultDataDir(), "directory for the SQLite file, the simulator state, the clock anchor and the admin token")
	f.StringVar(&o.SecretKeyFile, "secret-key-file", "", "file holding the 32-byte key kubeconfigs are sealed with; it must exist, and every server sharing a database needs the same (default <data-dir>/secret.key, created on first start)")
	f.StringVar(&o.AdvertiseURL, "advertise-url", "", "URL other servers on the same PostgreSQL reach this one's API at, to forward writes while it leads (default: the address it listens on; in a pod, http://$(POD_IP):PORT)")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve /metrics on this address instead of the API's (a scrape must carry SPARECAP_METRICS_TOKEN as a bearer token when that is set, wherever /metrics is served)")
	f.StringVar(&o.PprofAddr, "pprof-addr", "", "serve Go's profiling endpoints (/debug/pprof/) on this address, without authentication (keep it on loopback; default off)")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", ha.DefaultTTL, "how long the leader's lease lasts unless renewed (PostgreSQL): about how long the other servers wait before taking over from a leader that died")
	f.StringVar(&o.FleetFile, "fleet", "", "fleet YAML file (default: the built-in fleet)")
	f.DurationVar(&o.DrainWindow, "drain-window", 5*time.Minute, "how long a reclaimed node gets before it is removed regardless")
	f.DurationVar(&o.Cooldown, "cooldown", 30*time.Second, "how long a machine released by standard nodes waits before it is lent as preemptible (0 disables)")
	f.Float64Var(&o.Speed, "speed", 1, "run the clock N times faster than real time (demos and the simulated fleet)")
	f.DurationVar(&o.ProvisionTime, "provision-time", 20*time.Second, "how long a simulated machine takes to join a cluster")
	f.Int64Var(&o.SimSeed, "sim-seed", 0, "seed of the simulated pods' behaviour")
	f.StringVar(&o.PreemptibleDiscount, "preemptible-discount", "50", "discount of preemptible capacity off the on-demand price, in percent (a change applies from now on)")
	f.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.MachineProvider, "machine-provider", "sim", "how machines are prepared: sim (simulated), register (nothing boots; attached clusters get their Node objects created Ready) or exec (run --provision-hook)")
	f.StringVar(&o.ProvisionHook, "provision-hook", "", "program run as HOOK provision|deprovision MACHINE CLUSTER NODE with a JSON document on stdin (--machine-provider exec; see docs/kubernetes.md)")
	f.StringArrayVar(&o.ProvisionHookArgs, "provision-hook-arg", nil, "argument passed to the hook before the action (repeatable)")
	f.DurationVar(&o.ProvisionHookTimeout, "provision-hook-timeout", 10*time.Minute, "how long one run of the hook may take before it is killed")
	f.StringArrayVar(&a.hookEnv, "provision-hook-env", nil, "NAME=VALUE, or NAME to pass on the server's value, added to the hook's environment, which otherwise holds only PATH, HOME, LANG, LC_ALL, TZ, TMPDIR and the SPARECAP_ variables of the run (repeatable)")
	f.Float32Var(&o.Kube.QPS, "kube-qps", kube.DefaultQPS, "client-side rate limit of calls to each attached cluster's API server, per second")
	f.IntVar(&o.Kube.Burst, "kube-burst", kube.DefaultBurst, "burst above --kube-qps allowed to each attached cluster's API server")
	f.DurationVar(&o.Kube.Timeout, "kube-timeout", kube.DefaultTimeout, "timeout of each call to a cluster's API server")
	f.DurationVar(&o.Slurm.PollEvery, "slurm-poll", slurm.DefaultPollEvery, "how often each SLURM cluster's nodes and jobs are read (sinfo --json, squeue --json)")
	f.DurationVar(&o.Slurm.Timeout, "slurm-timeout", slurm.DefaultTimeout, "timeout of each Slurm command")
	f.DurationVar(&o.Slurm.ProbeEvery, "slurm-probe-every", 0, "how often sparecap connects to each SLURM node's slurmd to find one that stopped answering before slurmctld does (0: never; each probe logs a line in the slurmd's log)")
	f.StringVar(&o.Slurm.AuthSocketDir, "slurm-auth-socket-dir", slurm.DefaultAuthSocketDir, "directory under which an attached slurm.conf's munge socket (AuthInfo=socket=...) must be; keep each tenant's munged socket here")
	f.StringArrayVar(&a.nodeLabels, "node-label", nil, "KEY=VALUE label added to every node in attached clusters (repeatable)")
	f.StringArrayVar(&a.nodeTaints, "node-taint", nil, "KEY[=VALUE]:EFFECT taint added to every node in attached clusters (repeatable)")
	f.StringArrayVar(&a.preemptibleTaints, "preemptible-taint", nil, "KEY[=VALUE]:EFFECT taint added to preemptible nodes only, so pods must tolerate it to land there (repeatable)")
	f.IntVar(&o.Workers, "workers", 256, "node steps (provisioning, drains) run at once")
	f.IntVar(&o.NoticeWorkers, "notice-workers", 1024, "steps delivering drain notices run at once, apart from the other steps")
	f.DurationVar(&o.AlertRetention, "budget-alert-retention", domain.DefaultAlertRetention, "how long budget alerts are kept; older ones are deleted in the background, a slice at a time (see docs/operations.md's retention table)")
	f.DurationVar(&o.UsageRetention, "usage-retention", domain.DefaultUsageRetention, "how long raw usage records are kept once their month is rolled up; whole past months are answered from the rollups, per-node and per-day lines only this far back")
	f.DurationVar(&o.HistoryRetention, "history-retention", domain.DefaultHistoryRetention, "how long the lost-work ledger and the history of removed nodes are kept; older entries are deleted in the background, a slice at a time")
	f.Int64Var(&o.StorageQuota, "project-storage-quota", domain.DefaultStorageQuota, "bytes a project's own input may make the server keep (work spans, budgets and alerts, webhook endpoints and deliveries, tokens), unless the operator set the project one of its own; past it its optional writes are refused")
	f.DurationVar(&o.SpanRetention, "work-span-retention", domain.DefaultSpanRetention, "how long raw work spans are kept once their month is rolled up; splits by namespace, account or label of whole past months come from the rollups, by job or unit of work only this far back")
	f.DurationVar(&o.NodeLostAfter, "node-lost-after", 5*time.Minute, "a ready node whose Node object stays NotReady this long is lost: billing stops, its machine is taken back and the node replaced (a Node deleted by someone else is lost at once)")
	f.DurationVar(&o.RegisterTimeout, "register-timeout", 15*time.Minute, "a node not registered Ready this long after its machine was first asked to prepare goes back and is replaced; its machine goes out of service after 3 such failures in a row")
}

// guardFlags defines the limits and protections that keep clients from
// overloading the server or making it act on their behalf.
func guardFlags(cmd *cobra.Command, o *server.Options, a *serverArgs) {
	f := cmd.Flags()
	l := &o.Limits
	f.DurationVar(&l.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "how long reading one request may take, body included (event streams are not bound by it)")
	f.DurationVar(&l.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "how long writing one response may take (event streams and long usage answers move it on as they write)")
	f.DurationVar(&l.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "how long a kept-alive connection may wait for its next request")
	f.IntVar(&l.MaxConnections, "max-connections", server.DefaultMaxConnections, "connections served at once; past it (or past --max-connections-per-address) a connection gets /healthz and /readyz answered and anything else refused at once (503, or 429)")
	f.IntVar(&l.MaxConnectionsPerAddress, "max-connections-per-address", 0, "connections one client address (an IPv6 client's /64) may hold at once; --trusted-proxies are not held to it (default: an eighth of --max-connections)")
	f.IntVar(&l.MaxStreamsPerProject, "max-streams-per-project", server.DefaultMaxStreamsPerProject, "event streams (watch=true) a project may hold open at once, whatever its tokens (per token for operators)")
	f.IntVar(&l.MaxStreamsPerProject, "max-streams-per-token", server.DefaultMaxStreamsPerProject, "")
	_ = f.MarkDeprecated("max-streams-per-token", "streams are now counted per project: use --max-streams-per-project")
	f.IntVar(&l.MaxTokensPerProject, "max-tokens-per-project", server.DefaultMaxTokensPerProject, "active tokens a project may hold; the next is refused (409) until one is revoked")
	f.Float64Var(&l.BudgetWritesPerMinute, "budget-writes-per-minute", server.DefaultBudgetWritesPerMinute, "budgets a project may create or delete a minute, in bursts of as many; more get 429 with Retry-After (0: no limit; operators are not limited)")
	f.Float64Var(&l.TokenMintsPerMinute, "token-mints-per-minute", server.DefaultTokenMintsPerMinute, "tokens a project may mint (create or rotate) a minute, in bursts of as many; more get 429 with Retry-After (0: no limit; operators are not limited)")
	f.IntVar(&o.WebhookMaxPending, "webhook-max-pending", webhook.DefaultMaxPending, "webhook deliveries an endpoint may have pending (an endpoint that stopped answering); events past it are recorded failed, not sent")
	f.Float64Var(&l.TokenRate, "rate-limit-token", 100, "requests a second per token, in bursts of twice that (0: no limit); more get 429 with Retry-After")
	f.Float64Var(&l.AddressRate, "rate-limit-address", 200, "requests a second per client address, in bursts of twice that (0: no limit); more get 429 with Retry-After")
	f.IntVar(&l.AuthFailures, "auth-failures", 10, "failed authentications a minute per client address; once they are used up the address is refused (429) until they refill (0: no limit)")
	f.StringSliceVar(&l.TrustedProxies, "trusted-proxies", nil, "addresses or CIDR prefixes of reverse proxies, and of the other servers on the same PostgreSQL, whose X-Forwarded-For names the client (comma-separated)")
	f.StringArrayVar(&a.webhookAllow, "webhook-allow-cidr", nil, "CIDR prefix (or address) that webhook deliveries may reach although it is loopback, private, link-local, CGNAT or multicast, which are refused by default so a project cannot make the server call into its own network (repeatable; e.g. 10.0.0.0/8)")
	f.BoolVar(&o.AllowKubeconfigPlugins, "allow-kubeconfig-plugins", false, "accept kubeconfigs with exec credential plugins, auth-providers or proxy-urls. "+
		"RISKY: such a kubeconfig (often written by the tenant) runs its command on this host as the server user, with the server's environment (the admin token included), "+
		"or sends the cluster's traffic and credentials through the proxy it names")
}

// limitFlags checks the listener's limits.
func limitFlags(l server.Limits) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--read-timeout", l.ReadTimeout}, {"--write-timeout", l.WriteTimeout}, {"--idle-timeout", l.IdleTimeout}} {
		if d.v < time.Second {
			return fmt.Errorf("%s must be at least 1s; got %s", d.flag, d.v)
		}
	}
	switch {
	case l.MaxConnections < 1:
		return fmt.Errorf("--max-connections must be at least 1; got %d", l.MaxConnections)
	case l.MaxConnectionsPerAddress < 0:
		return fmt.Errorf("--max-connections-per-address must not be negative (0: an eighth of --max-connections); got %d", l.MaxConnectionsPerAddress)
	case l.MaxStreamsPerProject < 1:
		return fmt.Errorf("--max-streams-per-project must be at least 1; got %d", l.MaxStreamsPerProject)
	case l.MaxTokensPerProject < 1:
		return fmt.Errorf("--max-tokens-per-project must be at least 1; got %d", l.MaxTokensPerProject)
	case l.BudgetWritesPerMinute < 0:
		return fmt.Errorf("--budget-writes-per-minute must not be negative (0 is no limit); got %g", l.BudgetWritesPerMinute)
	case l.TokenMintsPerMinute < 0:
		return fmt.Errorf("--token-mints-per-minute must not be negative (0 is no limit); got %g", l.TokenMintsPerMinute)
	case l.TokenRate < 0 || l.AddressRate < 0 || l.AuthFailures < 0:
		return fmt.Errorf("--rate-limit-token, --rate-limit-address and --auth-failures must not be negative (0 is no limit)")
	}
	if _, err := guard.ParsePrefixes(l.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	return nil
}

// kubeFlags checks the Kubernetes and machine provider flags into o.
func kubeFlags(o *server.Options, labels, taints, preemptible []string) error {
	switch o.MachineProvider {
	case "sim", "register":
		if o.ProvisionHook != "" {
			return fmt.Errorf("--provision-hook needs --machine-provider exec")
		}
	case "exec":
		if o.ProvisionHook == "" {
			return fmt.Errorf("--machine-provider exec needs --provision-hook")
		}
		if _, err := exec.LookPath(o.ProvisionHook); err != nil {
			return fmt.Errorf("--provision-hook: %w", err)
		}
	default:
		return fmt.Errorf("--machine-provider must be sim, register or exec; got %q", o.MachineProvider)
	}
	if o.ProvisionHookTimeout <= 0 {
		return fmt.Errorf("--provision-hook-timeout must be positive; got %s", o.ProvisionHookTimeout)
	}
	if o.Kube.QPS <= 0 || o.Kube.Burst < 1 {
		return fmt.Errorf("--kube-qps and --kube-burst must be positive")
	}
	if o.WebhookMaxPending < 1 {
		return fmt.Errorf("--webhook-max-pending must be at least 1; got %d", o.WebhookMaxPending)
	}
	if o.Slurm.PollEvery < 100*time.Millisecond || o.Slurm.Timeout < time.Second || o.Slurm.ProbeEvery < 0 {
		return fmt.Errorf("--slurm-poll must be at least 100ms, --slurm-timeout at least 1s, --slurm-probe-every not negative")
	}
	if !filepath.IsAbs(o.Slurm.AuthSocketDir) {
		return fmt.Errorf("--slurm-auth-socket-dir must be an absolute path; got %q", o.Slurm.AuthSocketDir)
	}
	if o.Kube.Timeout < time.Second {
		return fmt.Errorf("--kube-timeout must be at least 1s; got %s", o.Kube.Timeout)
	}
	if o.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1; got %d", o.Workers)
	}
	if o.NoticeWorkers < 1 {
		return fmt.Errorf("--notice-workers must be at least 1; got %d", o.NoticeWorkers)
	}
	if o.AlertRetention < 24*time.Hour {
		return fmt.Errorf("--budget-alert-retention must be at least 24h; got %s", o.AlertRetention)
	}
	if o.HistoryRetention < 28*24*time.Hour {
		return fmt.Errorf("--history-retention must be at least 672h (28 days: the statistics read as much); got %s", o.HistoryRetention)
	}
	if o.StorageQuota < 1<<20 {
		return fmt.Errorf("--project-storage-quota must be at least 1048576 bytes (1 MiB); got %d", o.StorageQuota)
	}
	if o.UsageRetention < domain.MinRawRetention || o.SpanRetention < domain.MinRawRetention {
		return fmt.Errorf("--usage-retention and --work-span-retention must be at least 768h (32 days: a budget reads its whole month); got %s and %s", o.UsageRetention, o.SpanRetention)
	}
	if o.NodeLostAfter < time.Second {
		return fmt.Errorf("--node-lost-after must be at least 1s; got %s", o.NodeLostAfter)
	}
	if o.RegisterTimeout < time.Second {
		return fmt.Errorf("--register-timeout must be at least 1s; got %s", o.RegisterTimeout)
	}
	for _, l := range labels {
		k, v, err := kube.ParseLabel(l)
		if err != nil {
			return fmt.Errorf("--node-label: %w", err)
		}
		if o.Kube.NodeLabels == nil {
			o.Kube.NodeLabels = map[string]string{}
		}
		o.Kube.NodeLabels[k] = v
	}
	for _, set := range []struct {
		flag string
		in   []string
		out  *[]kube.Taint
	}{{"--node-taint", taints, &o.Kube.NodeTaints}, {"--preemptible-taint", preemptible, &o.Kube.PreemptibleTaints}} {
		for _, s := range set.in {
			t, err := kube.ParseTaint(s)
			if err != nil {
				return fmt.Errorf("%s: %w", set.flag, err)
			}
			*set.out = append(*set.out, t)
		}
	}
	return nil
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// provisionHookEnv checks the --provision-hook-env entries into
// o.ProvisionHookEnv as NAME=VALUE. A bare NAME takes the server's value,
// so a secret need not appear on the command line. SPARECAP_ names are
// refused: they are the server's own (its admin token) or set by sparecap
// for each run.
func provisionHookEnv(o *server.Options, entries []string) error {
	if len(entries) > 0 && o.MachineProvider != "exec" {
		return fmt.Errorf("--provision-hook-env needs --machine-provider exec")
	}
	for _, e := range entries {
		name, value, hasValue := strings.Cut(e, "=")
		switch {
		case !envName.MatchString(name):
			return fmt.Errorf("--provision-hook-env: %q: want NAME=VALUE, or NAME to pass on the server's value", e)
		case strings.HasPrefix(strings.ToUpper(name), "SPARECAP_"):
			return fmt.Errorf("--provision-hook-env: %s: SPARECAP_ variables are the server's own or set by sparecap for each run; a hook never gets the server's", name)
		case !hasValue:
			v, ok := os.LookupEnv(name)
			if !ok {
				return fmt.Errorf("--provision-hook-env: %s is not set in the server's environment (give NAME=VALUE to set it)", name)
			}
			value = v
		}
		o.ProvisionHookEnv = append(o.ProvisionHookEnv, name+"="+value)
	}
	return nil
}

func dataDir(o server.Options) string {
	if o.DataDir != "" {
		return o.DataDir
	}
	return server.DefaultDataDir()
}

func demoCmd(wall clock.Clock) *cobra.Command {
	o := demo.Options{Clock: wall}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a narrated scenario on an embedded server: fill, reclaim, replenish",
		Long: `Start an embedded server on a simulated fleet at high speed and play a scenario
through the public API, narrating each step: a cluster with 8 standard and 16
preemptible GPUs fills up; an on-demand burst from another tenant reclaims the
preemptible nodes (each notice with its deadline, pods exiting, nodes removed
early or at the deadline); the burst ends and the target is replenished.
A real training job ('sparecap trainer' under 'sparecap run', as local
processes) runs on a preemptible node through the reclaim: it checkpoints on
the notice, exits early and resumes on the refilled node, and the narration
counts the steps it lost and the time the reclaim cost it.

It takes well under a minute and leaves nothing behind.`,
		Example: `  sparecap demo
  sparecap demo --speed 120`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Speed < 1 {
				return fmt.Errorf("--speed must be at least 1; got %g", o.Speed)
			}
			server.SetProcs(os.Getenv("GOMAXPROCS"))
			return demo.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().Float64Var(&o.Speed, "speed", 60, "clock speed; at 60 the 5-minute drain window lasts 5 seconds")
	cmd.Flags().StringVar(&o.DataDir, "data-dir", "", "keep the demo's state here, made if missing (default: a temporary directory, removed afterwards)")
	return cmd
}
