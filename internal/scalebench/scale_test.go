package scalebench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	flagGPUs            = flag.Int("gpus", 96000, "GPUs in the generated fleet (machines of 8 GPUs, 16 partitions)")
	flagClusters        = flag.Int("clusters", 1000, "clusters to create")
	flagClients         = flag.Int("clients", 16, "concurrent clients creating clusters")
	flagReadClients     = flag.Int("read-clients", 8, "concurrent clients in the read phases")
	flagDB              = flag.String("db", "sqlite", "store: sqlite or postgres")
	flagSpeed           = flag.Float64("speed", 60, "the server's --speed")
	flagBurst           = flag.Int("burst", 500, "preemptible nodes the burst must reclaim (0 skips the burst)")
	flagBinary          = flag.String("binary", "", "a prebuilt sparecap binary (default: build ./cmd/sparecap)")
	flagKeep            = flag.Bool("keep", false, "keep the data directory (and PostgreSQL database) and print where")
	flagOut             = flag.String("out", "", "write every figure as JSON to this file")
	flagConvergeTimeout = flag.Duration("converge-timeout", 20*time.Minute, "give up waiting for convergence after this long")
	flagCreateTimeout   = flag.Duration("create-timeout", 30*time.Minute, "give up on the create phase after this long")
	flagRequestTimeout  = flag.Duration("request-timeout", 2*time.Minute, "timeout of one API request")
	flagBurstTimeout    = flag.Duration("burst-timeout", 5*time.Minute, "give up waiting for the burst's notices after this long")
	flagHandoverTimeout = flag.Duration("handover-timeout", 10*time.Minute, "give up waiting for the burst's standard nodes after this long")
	flagStartTimeout    = flag.Duration("start-timeout", 5*time.Minute, "give up waiting for /readyz after this long")
	flagCPUDuration     = flag.Duration("cpu-duration", 30*time.Second, "how long settled CPU is sampled")
	flagCPUAfter        = flag.Duration("cpu-after", 0, "wait this long after convergence before sampling settled CPU (the meter's first records of the new nodes fall in the first minute at --speed 1)")
	flagReadDuration    = flag.Duration("read-duration", 20*time.Second, "how long each read phase runs")
	flagReserved        = flag.Bool("reserved", true, "make clusters RESERVED in projects holding the partition's reservation")
	flagSeed            = flag.Uint64("seed", 1, "seed of the cluster shapes and of the readers' choices")
	flagSimSeed         = flag.Int64("sim-seed", -1, "the server's --sim-seed (negative: not passed)")
	flagServerArgs      = flag.String("server-args", "", "extra flags for `sparecap server`, space-separated")
)

// BurstProject holds the fill and burst clusters, so the read phases'
// projects keep exactly their clusters.
const BurstProject = "sb-burst"

// BenchmarkServerScale measures the real server binary at fleet scale; see
// the package documentation for what and how.
func BenchmarkServerScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("the whole run is one iteration: run with -benchtime 1x")
	}
	r := &run{b: b, rep: NewReport(), tokens: map[string]string{}, start: time.Now()}
	// SIGINT or SIGTERM ends the run early: the phase under way stops,
	// and what was measured is still printed and written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer r.finish()
	r.main(ctx)
}

// sleep waits d or until ctx is done, and says whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type created struct {
	ID      string
	Project string
	Spec    ClusterSpec
}

type run struct {
	b     *testing.B
	rep   *Report
	start time.Time

	plan    Plan
	dir     string
	db      *TempDatabase
	srv     *Server
	admin   *client
	tokens  map[string]string
	created []created
	// wantStd is how many standard nodes should be ready when settled.
	wantStd int
	failed  bool
	peakRSS int64

	interruptNoted bool
	binDir         string // of the binary built for the run

	hooks      *receiver // the webhook receiver (-webhooks)
	burstStart time.Time
}

// logf prints a progress line at once (go test streams a benchmark's
// output).
func (r *run) logf(format string, args ...any) {
	fmt.Printf("scalebench [%7.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// errorf marks the run failed, without stopping it.
func (r *run) errorf(format string, args ...any) {
	r.failed = true
	msg := fmt.Sprintf(format, args...)
	r.logf("ERROR: %s", msg)
	r.rep.Note("error: %s", msg)
	r.b.Errorf("%s", msg)
}

func (r *run) add(phase, key, label string, v float64, unit string) {
	r.rep.Add(phase, key, label, v, unit)
}

func (r *run) main(ctx context.Context) {
	b := r.b
	b.StopTimer()

	plan, err := NewPlan(Shape{GPUs: *flagGPUs, Clusters: *flagClusters, ClustersPerProject: 50, ReservationHolders: 4, Reserved: *flagReserved, Seed: *flagSeed})
	if err != nil {
		r.errorf("%v", err)
		return
	}
	r.plan = plan
	if *flagDB != "sqlite" && *flagDB != "postgres" {
		r.errorf("-db must be sqlite or postgres; got %q", *flagDB)
		return
	}
	r.describe()

	r.dir, err = os.MkdirTemp("", "scalebench-"+*flagDB+"-")
	if err != nil {
		r.errorf("data dir: %v", err)
		return
	}
	fleetPath := filepath.Join(r.dir, "fleet.yaml")
	if err := os.WriteFile(fleetPath, plan.FleetYAML(), 0o600); err != nil {
		r.errorf("write fleet file: %v", err)
		return
	}

	binary, err := r.binary(ctx)
	if err != nil {
		r.errorf("%v", err)
		return
	}
	args := []string{"--fleet", fleetPath, "--speed", fmt.Sprint(*flagSpeed)}
	// The benchmark measures the server, not its rate limits: its
	// clients all come from one address, far above the per-address
	// default. A binary from before the limits has no such flags.
	if help, _ := exec.CommandContext(ctx, binary, "server", "--help").CombinedOutput(); strings.Contains(string(help), "--rate-limit-address") {
		args = append(args, "--rate-limit-address", "0", "--rate-limit-token", "0")
	}
	if *flagSimSeed >= 0 {
		args = append(args, "--sim-seed", fmt.Sprint(*flagSimSeed))
	}
	if *flagDB == "postgres" {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		r.db, err = CreateDatabase(cctx, PostgresBase())
		cancel()
		if err != nil {
			r.errorf("%v (is PostgreSQL up? scripts/ensure-postgres.sh)", err)
			return
		}
		r.rep.Meta["postgres_database"] = r.db.Name
		args = append(args, "--db", r.db.URL)
	}
	args = append(args, webhookArgs()...)
	args = append(args, strings.Fields(*flagServerArgs)...)
	r.rep.Meta["server_args"] = strings.Join(args, " ")

	r.logf("starting %s server (data dir %s)", binary, r.dir)
	r.srv, err = StartServer(ctx, binary, r.dir, args, *flagStartTimeout)
	if err != nil {
		r.errorf("start server: %v", err)
		return
	}
	r.logf("server pid %d at %s, ready after %s", r.srv.Pid(), r.srv.URL, r.srv.Ready.Round(time.Millisecond))
	r.add("start", "start-ready-s", "exec to /readyz 200 (fleet registered)", r.srv.Ready.Seconds(), "s")
	r.admin = newClient(r.srv.URL, *flagRequestTimeout)
	defer r.admin.close()

	if err := r.projects(ctx); err != nil {
		r.errorf("projects: %v", err)
		return
	}
	if err := r.registerWebhooks(ctx); err != nil {
		r.errorf("webhooks: %v", err)
		return
	}
	before := r.scrape(ctx)
	cpu0 := r.cpu()
	createStart := time.Now()
	lastCreate, ok := r.creates(ctx)
	if !ok {
		return
	}
	r.checkpoint()
	converged := r.converge(ctx, createStart, lastCreate, before, cpu0)
	r.checkpoint()
	if r.srv.Exited() {
		r.errorf("the server exited: %v", r.srv.err)
		return
	}
	if !r.interrupted(ctx) {
		if !converged {
			r.rep.Note("the fleet did not converge: settled CPU and reads were measured on a fleet still at work")
		}
		r.settledCPU(ctx)
		r.checkpoint()
	}
	if !r.interrupted(ctx) {
		r.reads(ctx)
		r.checkpoint()
	}
	if *flagBurst > 0 && !r.interrupted(ctx) {
		if converged {
			r.burst(ctx)
			r.checkpoint()
		} else {
			r.errorf("burst skipped: the fleet did not converge, so what the burst reclaims cannot be planned")
		}
	}
	if !r.interrupted(ctx) {
		r.eventCensus(ctx)
	}
	if !r.interrupted(ctx) {
		r.webhookFigures(ctx)
	}
}

// interrupted says whether the run was interrupted, and marks it failed
// the first time.
func (r *run) interrupted(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	if !r.interruptNoted {
		r.interruptNoted = true
		r.errorf("interrupted (%v): the remaining phases are skipped", context.Cause(ctx))
	}
	return true
}

// checkpoint writes the figures so far to -out, so that a run killed
// later still leaves them.
func (r *run) checkpoint() {
	if *flagOut != "" {
		if err := r.rep.WriteJSON(*flagOut); err != nil {
			r.logf("write %s: %v", *flagOut, err)
		}
	}
}

// describe records the run's parameters.
func (r *run) describe() {
	p := r.plan
	m := r.rep.Meta
	m["gpus"], m["machines"], m["clusters"], m["projects"] = p.Shape.GPUs, p.Machines, len(p.Clusters), len(p.Projects)
	m["db"], m["speed"], m["clients"], m["read_clients"], m["burst"] = *flagDB, *flagSpeed, *flagClients, *flagReadClients, *flagBurst
	m["std_nodes_asked"], m["preemptible_nodes_asked"] = p.StdNodes, p.PreemptibleNodes
	m["preemptible_nodes_per_cluster"] = fmt.Sprintf("%d-%d", p.PreemptibleRange[0], p.PreemptibleRange[1])
	m["started"] = r.start.UTC().Format(time.RFC3339)
	m["go"], m["cpus"] = runtime.Version(), runtime.NumCPU()
	m["loadavg_at_start"] = LoadAvg()
	if wd, err := os.Getwd(); err == nil {
		if root, err := ModuleRoot(wd); err == nil {
			m["source"] = GitDescribe(root)
		}
	}
	reserved := 0
	for _, c := range p.Clusters {
		if c.Billing == "RESERVED" {
			reserved++
		}
	}
	m["reserved_clusters"] = reserved
	r.logf("plan: %d GPUs = %d machines in 16 partitions; %d projects; %d clusters (%d RESERVED) asking %d standard + %d preemptible nodes (%d-%d preemptible per cluster); db %s, speed %g",
		p.Shape.GPUs, p.Machines, len(p.Projects), len(p.Clusters), reserved, p.StdNodes, p.PreemptibleNodes, p.PreemptibleRange[0], p.PreemptibleRange[1], *flagDB, *flagSpeed)
}

func (r *run) binary(ctx context.Context) (string, error) {
	if *flagBinary != "" {
		r.rep.Meta["binary"] = *flagBinary
		return *flagBinary, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		return "", err
	}
	// Not in the data directory, whose size is a figure.
	r.binDir, err = os.MkdirTemp("", "scalebench-bin-")
	if err != nil {
		return "", err
	}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	bin, err := BuildBinary(bctx, root, r.binDir)
	if err != nil {
		return "", err
	}
	r.logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	r.rep.Meta["binary"] = "built from " + root
	return bin, nil
}

// finish prints and writes the report, stops the server and cleans up.
func (r *run) finish() {
	b := r.b
	if r.srv != nil && !r.srv.Exited() {
		r.stop()
	}
	if r.failed || b.Failed() {
		if r.srv != nil {
			fmt.Printf("---- last 60 lines of the server log %s ----\n%s\n---- end of server log ----\n", r.srv.LogPath, Tail(r.srv.LogPath, 60))
		}
	}
	if r.srv != nil {
		r.logErrors()
	}
	r.rep.Meta["wall_s"] = time.Since(r.start).Seconds()
	r.rep.Meta["loadavg_at_end"] = LoadAvg()
	fmt.Printf("\n==== scalebench: %d GPUs, %d clusters, %s, speed %g ====\n", r.plan.Shape.GPUs, len(r.plan.Clusters), *flagDB, *flagSpeed)
	r.rep.WriteTable(os.Stdout)
	for _, f := range r.rep.All() {
		b.ReportMetric(f.Value, MetricUnit(f.Key))
	}
	b.ReportMetric(0, "ns/op")
	if *flagOut != "" {
		if err := r.rep.WriteJSON(*flagOut); err != nil {
			b.Errorf("write %s: %v", *flagOut, err)
		} else {
			fmt.Printf("figures written to %s\n", *flagOut)
		}
	}
	if r.db != nil {
		if *flagKeep {
			fmt.Printf("kept PostgreSQL database %s (%s)\n", r.db.Name, r.db.URL)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := r.db.Drop(ctx); err != nil {
				b.Errorf("drop database %s: %v", r.db.Name, err)
			}
			cancel()
		}
	}
	if r.binDir != "" {
		_ = os.RemoveAll(r.binDir)
	}
	if r.dir != "" {
		if *flagKeep {
			fmt.Printf("kept the data directory %s (server log %s)\n", r.dir, filepath.Join(r.dir, LogName))
		} else {
			_ = os.RemoveAll(r.dir)
		}
	}
}

// logErrors counts the server log's error lines and notes the distinct
// messages.
func (r *run) logErrors() {
	data, err := os.ReadFile(r.srv.LogPath)
	if err != nil {
		return
	}
	counts := map[string]int{}
	errs, warns := 0, 0
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.Contains(l, "level=ERROR"):
			errs++
			counts[logMsg(l)]++
		case strings.Contains(l, "level=WARN"):
			warns++
			counts[logMsg(l)]++
		case strings.Contains(l, "panic:") || strings.Contains(l, "fatal error:"):
			errs++
			counts[l]++
		}
	}
	r.add("log", "log-errors", "error lines in the server log", float64(errs), "lines")
	r.add("log", "log-warnings", "warning lines in the server log", float64(warns), "lines")
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	for i, k := range keys {
		if i == 10 {
			r.rep.Note("server log: %d more distinct messages", len(keys)-10)
			break
		}
		r.rep.Note("server log (%d×): %s", counts[k], k)
	}
}

// logMsg is the level and msg of a slog text line, with its error, cut
// short, so that lines differing only in time and IDs count together.
func logMsg(l string) string {
	msg := l
	if i := strings.Index(l, "level="); i >= 0 {
		msg = l[i:]
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

func (r *run) scrape(ctx context.Context) Scrape {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sc, err := r.admin.metrics(ctx)
	if err != nil {
		r.logf("scrape /metrics: %v", err)
		return nil
	}
	return sc
}

func (r *run) cpu() time.Duration {
	d, err := ProcCPU(r.srv.Pid())
	if err != nil {
		r.logf("read the server's CPU time: %v", err)
	}
	return d
}

// ---- projects ----

func (r *run) projects(ctx context.Context) error {
	start := time.Now()
	for _, p := range append(append([]string(nil), r.plan.Projects...), BurstProject) {
		var out apiProject
		rctx, cancel := context.WithTimeout(ctx, *flagRequestTimeout)
		err := r.admin.do(rctx, "POST", "/v1/admin/projects", AdminToken, map[string]string{"project_id": p}, &out)
		var se *statusError
		if errors.As(err, &se) && se.Status == 409 {
			// A reservation holder the fleet file created: issue its
			// first token.
			err = r.admin.do(rctx, "POST", "/v1/admin/projects/"+p+"/tokens", AdminToken, map[string]string{}, &out)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("project %s: %w", p, err)
		}
		if out.Token == "" {
			return fmt.Errorf("project %s: no token in the answer", p)
		}
		r.tokens[p] = out.Token
	}
	r.logf("%d projects with tokens in %s", len(r.tokens), time.Since(start).Round(time.Millisecond))
	return nil
}

// ---- creates ----

func (r *run) creates(ctx context.Context) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, *flagCreateTimeout)
	defer cancel()
	specs := make(chan ClusterSpec)
	var (
		lat      Latencies
		mu       sync.Mutex
		refused  int
		errs     []string
		nErrs    int
		last     time.Time
		wg       sync.WaitGroup
		progress = time.NewTicker(30 * time.Second)
	)
	defer progress.Stop()
	start := time.Now()
	for w := 0; w < *flagClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(r.srv.URL, *flagRequestTimeout)
			defer c.close()
			for s := range specs {
				body := createClusterRequest{ClusterName: s.Name, Region: s.Partition.Region, GPUType: s.Partition.GPUType,
					ClusterType: "KUBERNETES", BillingType: s.Billing, NumGPUs: s.NumGPUs, NumPreemptibleGPUs: s.NumPreemptibleGPUs, ProjectID: s.Project}
				var out apiCluster
				t0 := time.Now()
				err := c.do(ctx, "POST", "/v1/clusters", r.tokens[s.Project], body, &out)
				d := time.Since(t0)
				mu.Lock()
				last = time.Now()
				var se *statusError
				switch {
				case err == nil:
					lat.Add(d)
					r.created = append(r.created, created{ID: out.ClusterID, Project: s.Project, Spec: s})
				case errors.As(err, &se) && se.Code == "insufficient_capacity":
					refused++
				default:
					nErrs++
					if len(errs) < 5 {
						errs = append(errs, fmt.Sprintf("%s: %v", s.Name, err))
					}
				}
				mu.Unlock()
			}
		}()
	}
	r.logf("creating %d clusters with %d clients", len(r.plan.Clusters), *flagClients)
feed:
	for _, s := range r.plan.Clusters {
		for sent := false; !sent; {
			select {
			case specs <- s:
				sent = true
			case <-ctx.Done():
				break feed
			case <-progress.C:
				mu.Lock()
				n := len(r.created)
				mu.Unlock()
				r.logf("creates: %d/%d done (%.1f/s)", n, len(r.plan.Clusters), float64(n)/time.Since(start).Seconds())
			}
		}
	}
	close(specs)
	wg.Wait()
	wall := last.Sub(start)
	sum := lat.Summary()
	for _, c := range r.created {
		r.wantStd += c.Spec.NumGPUs / GPUsPerMachine
	}
	r.logf("creates: %d created, %d refused, %d errors in %s (%.2f/s); p50 %s p99 %s max %s",
		sum.N, refused, nErrs, wall.Round(time.Millisecond), float64(sum.N)/wall.Seconds(), sum.P50, sum.P99, sum.Max)
	r.add("create", "creates-ok", "clusters created (201)", float64(sum.N), "clusters")
	r.add("create", "creates-refused", "refused 409 insufficient_capacity", float64(refused), "clusters")
	r.add("create", "creates-errors", "other failures", float64(nErrs), "requests")
	r.add("create", "create-wall-s", "create phase wall time", wall.Seconds(), "s")
	r.add("create", "creates-per-s", "create rate", float64(sum.N)/wall.Seconds(), "creates/s")
	r.add("create", "create-p50-ms", "create latency p50", ms(sum.P50), "ms")
	r.add("create", "create-p99-ms", "create latency p99", ms(sum.P99), "ms")
	r.add("create", "create-max-ms", "create latency max", ms(sum.Max), "ms")
	r.add("create", "create-mean-ms", "create latency mean", ms(sum.Mean), "ms")
	if ctx.Err() != nil {
		r.errorf("the create phase did not finish within -create-timeout %s", *flagCreateTimeout)
	}
	if nErrs > 0 {
		r.errorf("%d creates failed, e.g. %s", nErrs, strings.Join(errs, "; "))
	}
	if refused > 0 {
		r.rep.Note("%d creates were refused for insufficient capacity (expected none at the default shape)", refused)
	}
	if len(r.created) == 0 {
		r.errorf("no cluster was created")
		return last, false
	}
	return last, true
}

// ---- convergence ----

// waitSettled polls /metrics every interval until the fleet is settled
// with wantStd standard nodes ready on two scrapes in a row. It returns
// when it was first seen settled, when all standard nodes were first seen
// ready, the last status, and whether it settled before timeout.
func (r *run) waitSettled(ctx context.Context, what string, wantStd int, interval, timeout time.Duration, lat *Latencies) (settledAt, stdAt time.Time, last Status, ok bool) {
	deadline := time.Now().Add(timeout)
	nextLog := time.Now().Add(30 * time.Second)
	var firstSettled time.Time
	for {
		t := time.Now()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		sc, err := r.admin.metrics(sctx)
		cancel()
		if err == nil && lat != nil {
			lat.Add(time.Since(t))
		}
		if err == nil {
			last = StatusOf(sc)
			if stdAt.IsZero() && last.StoreUp && last.Ready("standard") >= wantStd {
				stdAt = t
			}
			if last.Settled(wantStd) {
				if !firstSettled.IsZero() {
					return firstSettled, stdAt, last, true
				}
				firstSettled = t
			} else {
				firstSettled = time.Time{}
			}
		} else {
			r.logf("%s: scrape: %v", what, err)
		}
		if r.srv.Exited() {
			r.errorf("%s: the server exited: %v", what, r.srv.err)
			return time.Time{}, stdAt, last, false
		}
		if time.Now().After(nextLog) {
			r.logf("%s: %s (want %d standard ready)", what, last, wantStd)
			nextLog = time.Now().Add(30 * time.Second)
		}
		if time.Now().After(deadline) || !sleep(ctx, interval-time.Since(t)) {
			return time.Time{}, stdAt, last, false
		}
	}
}

func (r *run) converge(ctx context.Context, createStart, lastCreate time.Time, before Scrape, cpu0 time.Duration) bool {
	r.logf("waiting for convergence (%d standard nodes; timeout %s)", r.wantStd, *flagConvergeTimeout)
	var scrapes Latencies
	settledAt, stdAt, st, ok := r.waitSettled(ctx, "converge", r.wantStd, 2*time.Second, *flagConvergeTimeout, &scrapes)
	if sum := scrapes.Summary(); sum.N > 0 {
		r.add("converge", "converge-scrape-p50-ms", "GET /metrics while converging, p50", ms(sum.P50), "ms")
		r.add("converge", "converge-scrape-max-ms", "GET /metrics while converging, max", ms(sum.Max), "ms")
	}
	cpu1 := r.cpu()
	end := settledAt
	if !ok {
		end = time.Now()
	}
	r.logf("converge: %s", st)
	if ok {
		r.add("converge", "converge-s", "last create to every node ready (settled)", settledAt.Sub(lastCreate).Seconds(), "s")
	} else {
		// Another key, so that a comparison never reads the wait as a
		// convergence time.
		r.add("converge", "converge-gave-up-s", "did NOT converge: gave up after", time.Since(lastCreate).Seconds(), "s")
		if ctx.Err() != nil {
			r.errorf("interrupted before convergence, %s after the last create: %s", time.Since(lastCreate).Round(time.Second), st)
		} else {
			r.errorf("did not converge within -converge-timeout %s: %s", *flagConvergeTimeout, st)
		}
	}
	if !stdAt.IsZero() {
		r.add("converge", "converge-std-s", "last create to all standard nodes ready", max(0, stdAt.Sub(lastCreate).Seconds()), "s")
	}
	r.add("converge", "converged", "converged (1 yes, 0 no)", b2f(ok), "bool")
	r.add("converge", "nodes-std-ready", "standard nodes ready", float64(st.Ready("standard")), "nodes")
	r.add("converge", "nodes-preemptible-ready", "preemptible nodes ready", float64(st.Ready("preemptible")), "nodes")
	r.add("converge", "nodes-ready", "nodes ready in all", float64(st.Ready("standard")+st.Ready("preemptible")), "nodes")
	r.add("converge", "preemptible-gpus-allocated", "preemptible GPUs allocated", float64(st.AllocatedPreemptibleGPUs), "GPUs")
	r.add("converge", "preemptible-gpus-desired", "preemptible GPUs desired", float64(st.DesiredPreemptibleGPUs), "GPUs")
	unmet := 0
	for _, n := range st.Unfulfilled {
		unmet += n
	}
	r.add("converge", "targets-unfulfilled", "clusters below their preemptible target", float64(unmet), "clusters")
	for _, reason := range []string{"NoSpareCapacity", "FairShare"} {
		if n := st.Unfulfilled[reason]; n > 0 {
			r.add("converge", "targets-unfulfilled-"+reason, "clusters unfulfilled: "+reason, float64(n), "clusters")
		}
	}
	r.outOfService(ctx, "converge", "converge-out-of-service")
	setupCPU := cpu1 - cpu0
	r.add("converge", "cpu-create-converge-s", "server CPU, creates + convergence", setupCPU.Seconds(), "CPU-s")
	if span := end.Sub(createStart); span > 0 {
		r.add("converge", "cpu-create-converge-pct", "server CPU, creates + convergence, per wall second", 100*setupCPU.Seconds()/span.Seconds(), "%core")
	}
	if after := r.scrape(ctx); after != nil && before != nil {
		b, a := Reclaims(before), Reclaims(after)
		for _, cause := range []string{"preempted", "fair_share"} {
			r.add("converge", "setup-reclaims-"+cause, "drains started during setup: "+cause, a[cause]-b[cause], "drains")
		}
	}
	return ok
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ---- settled CPU ----

func (r *run) settledCPU(ctx context.Context) {
	pid := r.srv.Pid()
	if *flagCPUAfter > 0 {
		r.logf("waiting %s before sampling the server's CPU", *flagCPUAfter)
		if !sleep(ctx, *flagCPUAfter) {
			return
		}
	}
	r.logf("sampling the server's CPU for %s with no client running", *flagCPUDuration)
	c0, err := ProcCPU(pid)
	if err != nil {
		r.errorf("settled CPU: %v", err)
		return
	}
	t0 := time.Now()
	if !sleep(ctx, *flagCPUDuration) {
		return
	}
	c1, err := ProcCPU(pid)
	if err != nil {
		r.errorf("settled CPU: %v", err)
		return
	}
	wall := time.Since(t0)
	pct := 100 * (c1 - c0).Seconds() / wall.Seconds()
	r.logf("settled CPU: %.1f%% of one core", pct)
	r.add("settled", "settled-cpu-pct", "server CPU at rest", pct, "%core")
	if rss, err := ProcStatusKB(pid, "VmRSS"); err == nil {
		r.add("settled", "settled-rss-mib", "server RSS at rest", mib(rss), "MiB")
	}
}

// ---- reads ----

func (r *run) reads(ctx context.Context) {
	if len(r.created) == 0 {
		return
	}
	// GET /v1/clusters/{id} on random clusters.
	get := r.readLoad(ctx, "get", func(c *client, rng *rand.Rand) error {
		cl := r.created[rng.IntN(len(r.created))]
		return c.do(ctx, "GET", "/v1/clusters/"+cl.ID, r.tokens[cl.Project], nil, nil)
	})
	r.reportReads("reads", "get", "GET /v1/clusters/{id}", get)

	// GET /v1/clusters of the project with the most clusters.
	proj := r.plan.ListProject
	want := 0
	for _, c := range r.created {
		if c.Project == proj {
			want++
		}
	}
	var check apiClusterList
	cctx, cancel := context.WithTimeout(ctx, *flagRequestTimeout)
	err := r.admin.do(cctx, "GET", "/v1/clusters", r.tokens[proj], nil, &check)
	cancel()
	if err != nil {
		r.errorf("GET /v1/clusters of %s: %v", proj, err)
		return
	}
	if len(check.Clusters) != want {
		r.rep.Note("GET /v1/clusters of %s listed %d clusters; %d were created", proj, len(check.Clusters), want)
	}
	r.add("reads", "list-clusters", "clusters in each list answer", float64(len(check.Clusters)), "clusters")
	list := r.readLoad(ctx, "list", func(c *client, _ *rand.Rand) error {
		return c.do(ctx, "GET", "/v1/clusters", r.tokens[proj], nil, nil)
	})
	r.reportReads("reads", "list", fmt.Sprintf("GET /v1/clusters (%d clusters)", len(check.Clusters)), list)
}

type readResult struct {
	Summary
	Wall time.Duration
}

// readLoad runs -read-clients clients doing one request each in a loop
// for -read-duration.
func (r *run) readLoad(ctx context.Context, what string, one func(*client, *rand.Rand) error) readResult {
	r.logf("reads: %s with %d clients for %s", what, *flagReadClients, *flagReadDuration)
	var lat Latencies
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	stop := start.Add(*flagReadDuration)
	for w := 0; w < *flagReadClients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := newClient(r.srv.URL, *flagRequestTimeout)
			defer c.close()
			rng := rand.New(rand.NewPCG(*flagSeed, uint64(w)+1))
			for time.Now().Before(stop) && ctx.Err() == nil {
				t0 := time.Now()
				if err := one(c, rng); err != nil {
					lat.Err()
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				lat.Add(time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	res := readResult{Summary: lat.Summary(), Wall: time.Since(start)}
	if firstErr != nil {
		r.errorf("reads %s: %d requests failed, first: %v", what, res.Errors, firstErr)
	}
	r.logf("reads %s: %d in %s (%.0f/s), p50 %s p99 %s max %s, %d errors", what, res.N, res.Wall.Round(time.Millisecond),
		float64(res.N)/res.Wall.Seconds(), res.P50, res.P99, res.Max, res.Errors)
	return res
}

func (r *run) reportReads(phase, key, label string, res readResult) {
	r.add(phase, key+"-per-s", label+" rate", float64(res.N)/res.Wall.Seconds(), "req/s")
	r.add(phase, key+"-p50-ms", label+" p50", ms(res.P50), "ms")
	r.add(phase, key+"-p99-ms", label+" p99", ms(res.P99), "ms")
	r.add(phase, key+"-max-ms", label+" max", ms(res.Max), "ms")
	r.add(phase, key+"-errors", label+" errors", float64(res.Errors), "requests")
}

// ---- burst ----

// partitionStates reads the admin machine listing.
func (r *run) partitionStates(ctx context.Context) (map[Partition]PartitionState, time.Duration, error) {
	var ml apiMachineList
	ctx, cancel := context.WithTimeout(ctx, *flagRequestTimeout)
	defer cancel()
	t0 := time.Now()
	if err := r.admin.do(ctx, "GET", "/v1/admin/machines", AdminToken, nil, &ml); err != nil {
		return nil, 0, fmt.Errorf("GET /v1/admin/machines: %w", err)
	}
	d := time.Since(t0)
	out := map[Partition]PartitionState{}
	for _, p := range Partitions() {
		out[p] = PartitionState{Partition: p}
	}
	for _, m := range ml.Machines {
		p := Partition{m.Region, m.GPUType}
		s := out[p]
		s.Partition = p
		if m.Pool == "on-demand" {
			switch {
			case m.State == "free":
				s.ODFree++
			case m.State == "ready" && strings.HasPrefix(m.NodeName, "gpu-preemptible-"):
				s.ODPreemptible++
			}
		}
		out[p] = s
	}
	return out, d, nil
}

func (r *run) burst(ctx context.Context) {
	want := *flagBurst
	states, listDur, err := r.partitionStates(ctx)
	if err != nil {
		r.errorf("burst: %v", err)
		return
	}
	r.add("burst", "machines-list-ms", "GET /v1/admin/machines (whole fleet)", ms(listDur), "ms")
	var all []PartitionState
	lent := 0
	for _, p := range Partitions() {
		all = append(all, states[p])
		lent += states[p].ODPreemptible
	}
	parts := PlanBurst(all, want)
	planned := 0
	for _, p := range parts {
		planned += p.Reclaim
	}
	if planned < want {
		r.rep.Note("burst: only %d on-demand machines are lent to preemptible nodes; the burst reclaims %d, not %d", lent, planned, want)
	}
	if planned == 0 {
		r.errorf("burst: nothing to reclaim (no on-demand machine serves a preemptible node)")
		return
	}
	r.logf("burst: %d partitions: %s", len(parts), describeParts(parts))

	// Fill the picked partitions' free on-demand machines first.
	var fills []ClusterSpec
	fillNodes := 0
	for i, p := range parts {
		if p.Fill > 0 {
			fills = append(fills, ClusterSpec{Name: fmt.Sprintf("fill-%02d", i), Project: BurstProject, Partition: p.Partition, Billing: "ON_DEMAND", NumGPUs: p.Fill * GPUsPerMachine})
			fillNodes += p.Fill
		}
	}
	if len(fills) > 0 {
		r.logf("burst: filling %d free on-demand machines first", fillNodes)
		t0 := time.Now()
		res := r.createAll(ctx, fills)
		if res.failed > 0 {
			r.errorf("burst: %d fill creates failed: %s", res.failed, res.firstErr)
			return
		}
		r.wantStd += fillNodes
		settledAt, _, st, ok := r.waitSettled(ctx, "fill", r.wantStd, time.Second, *flagConvergeTimeout, nil)
		if !ok {
			r.errorf("burst: the fill did not settle within %s: %s", *flagConvergeTimeout, st)
			return
		}
		r.add("burst", "fill-nodes", "fill: standard nodes on free on-demand machines", float64(fillNodes), "nodes")
		r.add("burst", "fill-ready-s", "fill: creates sent to nodes ready", settledAt.Sub(t0).Seconds(), "s")
	}

	// Check the picked partitions again: what is free now is added to the
	// burst, so that it still reclaims what was planned.
	states, _, err = r.partitionStates(ctx)
	if err != nil {
		r.errorf("burst: %v", err)
		return
	}
	var bursts []ClusterSpec
	expect := 0
	for i, p := range parts {
		s := states[p.Partition]
		k := min(p.Reclaim, s.ODPreemptible)
		if k == 0 {
			continue
		}
		expect += k
		bursts = append(bursts, ClusterSpec{Name: fmt.Sprintf("burst-%02d", i), Project: BurstProject, Partition: p.Partition, Billing: "ON_DEMAND", NumGPUs: (s.ODFree + k) * GPUsPerMachine})
		r.wantStd += s.ODFree + k
	}
	r.add("burst", "burst-reclaims-planned", "preemptible nodes the burst must reclaim", float64(expect), "nodes")
	r.add("burst", "burst-partitions", "partitions of the burst", float64(len(bursts)), "partitions")

	before := r.scrape(ctx)
	if before == nil {
		r.errorf("burst: cannot scrape /metrics")
		return
	}
	r.measureBurst(ctx, bursts, expect, before)
}

// measureBurst sends the burst's creates at once and follows /metrics
// until every drain they started has had its notice delivered (or ended
// without one) and the fleet has settled again.
func (r *run) measureBurst(ctx context.Context, bursts []ClusterSpec, expect int, before Scrape) {
	b0, f0, h0 := Reclaims(before), before.ByLabel(mReclaimsFinished, "outcome"), before.Histogram(mNoticeFanout)
	r.logf("burst: creating %d standard-only clusters at once to reclaim %d preemptible nodes", len(bursts), expect)
	t0 := time.Now()
	r.burstStart = t0
	done := make(chan createResult, 1)
	go func() { done <- r.createAll(ctx, bursts) }()

	var (
		res                       createResult
		createsDone               bool
		createsAt                 time.Time
		committedAt, noticesAt    time.Time
		drainsEndedAt, lastNotice time.Time
		settledAt, firstSettled   time.Time
		stdAt                     time.Time
		atNotices                 Scrape // the scrape that saw every notice out
		last                      Scrape
		st                        Status
		dStarted, dNotices        float64
		dPreempted, dFair, dEnded float64
		dEarly, dDeadline         float64
		scrapes                   Latencies
		noticeDeadline            = t0.Add(*flagBurstTimeout)
		handoverDeadline          = t0.Add(*flagHandoverTimeout)
		nextLog                   = t0.Add(30 * time.Second)
	)
	for {
		if !createsDone {
			select {
			case res = <-done:
				createsDone, createsAt = true, time.Now()
			default:
			}
		}
		t := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		sc, err := r.admin.metrics(sctx)
		cancel()
		if err != nil {
			r.logf("burst: scrape: %v", err)
		} else {
			scrapes.Add(time.Since(t))
			last = sc
			rc, fo, h := Reclaims(sc), sc.ByLabel(mReclaimsFinished, "outcome"), sc.Histogram(mNoticeFanout)
			dStarted = sumCauses(rc) - sumCauses(b0)
			dPreempted, dFair = rc["preempted"]-b0["preempted"], rc["fair_share"]-b0["fair_share"]
			dEarly, dDeadline = fo["early"]-f0["early"], fo["deadline"]-f0["deadline"]
			dEnded = dEarly + dDeadline
			if n := h.Count - h0.Count; n > dNotices {
				lastNotice = t
				dNotices = n
			}
			started := createsDone && dPreempted >= float64(expect)
			if committedAt.IsZero() && started {
				committedAt = t
			}
			if noticesAt.IsZero() && started && dNotices >= dStarted {
				noticesAt, atNotices = t, sc
			}
			if drainsEndedAt.IsZero() && started && dEnded >= dStarted {
				drainsEndedAt = t
			}
			st = StatusOf(sc)
			if stdAt.IsZero() && createsDone && st.StoreUp && st.Ready("standard") >= r.wantStd {
				stdAt = t
			}
			if createsDone && st.Settled(r.wantStd) {
				if firstSettled.IsZero() {
					firstSettled = t
				} else if t.Sub(firstSettled) >= time.Second && settledAt.IsZero() {
					settledAt = firstSettled
				}
			} else {
				firstSettled = time.Time{}
			}
		}
		noticesOver := !noticesAt.IsZero() || !drainsEndedAt.IsZero() || t.After(noticeDeadline)
		if createsDone && (res.failed > 0 || (noticesOver && !settledAt.IsZero())) {
			break
		}
		if t.After(handoverDeadline) || r.srv.Exited() || ctx.Err() != nil {
			break
		}
		if t.After(nextLog) {
			r.logf("burst: %.0f drains started (%.0f preempted), %.0f notices, %.0f drains ended; %s", dStarted, dPreempted, dNotices, dEnded, st)
			nextLog = t.Add(30 * time.Second)
		}
		interval := 200 * time.Millisecond
		if noticesOver {
			interval = time.Second
		}
		sleep(ctx, interval-time.Since(t))
	}
	if !createsDone {
		res = <-done
		createsAt = time.Now()
	}
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	r.add("burst", "burst-create-max-ms", "burst creates: slowest answer", ms(res.lat.Max), "ms")
	r.add("burst", "burst-creates-s", "burst: creates sent to all answered", since(createsAt), "s")
	if res.failed > 0 {
		r.errorf("burst: %d creates failed: %s", res.failed, res.firstErr)
	}
	if !committedAt.IsZero() {
		r.add("burst", "burst-committed-s", "burst: creates sent to every drain started (T+0 committed)", since(committedAt), "s")
	}
	r.add("burst", "burst-reclaims-preempted", "burst: drains started, preempted", dPreempted, "drains")
	r.add("burst", "burst-reclaims-fair-share", "burst: drains started, fair_share", dFair, "drains")
	r.add("burst", "burst-reclaims-all", "burst: drains started, every cause", dStarted, "drains")
	r.add("burst", "burst-notices", "burst: notices delivered", dNotices, "notices")
	r.add("burst", "burst-notices-missing", "burst: drains that ended with no notice delivered", max(0, dStarted-dNotices), "drains")
	if !noticesAt.IsZero() {
		r.add("burst", "burst-notices-s", "burst: creates sent to every notice delivered (wall clock)", since(noticesAt), "s")
		r.logf("burst: %.0f drains started, all %.0f notices delivered %.2fs after the creates were sent", dStarted, dNotices, since(noticesAt))
	} else {
		r.errorf("burst: only %.0f of %.0f drains got their notice delivered (%.0f drains ended; waited %s)", dNotices, dStarted, dEnded, time.Since(t0).Round(time.Second))
		if !lastNotice.IsZero() {
			r.add("burst", "burst-last-notice-s", "burst: creates sent to the last notice seen (incomplete)", since(lastNotice), "s")
		}
	}
	if !drainsEndedAt.IsZero() {
		r.add("burst", "burst-drains-ended-s", "burst: creates sent to every drain ended", since(drainsEndedAt), "s")
	}
	r.add("burst", "burst-drains-early", "burst: drains ended early (pods gone)", dEarly, "drains")
	r.add("burst", "burst-drains-deadline", "burst: drains ended at the deadline", dDeadline, "drains")
	hs := atNotices
	if hs == nil {
		hs = last
	}
	if hs != nil {
		h := hs.Histogram(mNoticeFanout).Sub(h0)
		speed := *flagSpeed
		r.add("burst", "fanout-count", "notice fan-out histogram: observations", h.Count, "notices")
		if h.Count > 0 {
			maxB := h.Quantile(1)
			r.add("burst", "fanout-max-bucket-server-s", "notice fan-out histogram: highest bucket reached (server s)", maxB, "server-s")
			r.add("burst", "fanout-max-bucket-wall-s", "notice fan-out histogram: highest bucket reached (wall s)", maxB/speed, "s")
			r.add("burst", "fanout-p50-bucket-wall-s", "notice fan-out histogram: p50 bucket bound (wall s)", h.Quantile(0.5)/speed, "s")
			r.add("burst", "fanout-p99-bucket-wall-s", "notice fan-out histogram: p99 bucket bound (wall s)", h.Quantile(0.99)/speed, "s")
			r.add("burst", "fanout-mean-server-s", "notice fan-out histogram: mean (server s)", h.Mean(), "server-s")
			r.add("burst", "fanout-mean-wall-s", "notice fan-out histogram: mean (wall s)", h.Mean()/speed, "s")
		}
	}
	sum := scrapes.Summary()
	r.add("burst", "burst-scrape-p50-ms", "GET /metrics during the burst, p50", ms(sum.P50), "ms")
	r.add("burst", "burst-scrape-max-ms", "GET /metrics during the burst, max", ms(sum.Max), "ms")
	if !stdAt.IsZero() {
		r.add("burst", "handover-std-s", "burst: creates sent to every standard node ready", since(stdAt), "s")
	}
	if !settledAt.IsZero() {
		r.add("burst", "handover-s", "burst: creates sent to settled again", since(settledAt), "s")
	} else if res.failed == 0 {
		r.errorf("burst: not settled again within -handover-timeout %s: %s", *flagHandoverTimeout, st)
	}
	r.logf("hand-over: %s", st)
	r.outOfService(ctx, "burst", "burst-out-of-service")
}

// outOfService counts the machines out of service (sparecap takes a
// machine out after three nodes in a row failed to register on it) and
// notes why.
func (r *run) outOfService(ctx context.Context, phase, key string) {
	var ml apiMachineList
	ctx, cancel := context.WithTimeout(ctx, *flagRequestTimeout)
	defer cancel()
	if err := r.admin.do(ctx, "GET", "/v1/admin/machines?state=out_of_service", AdminToken, nil, &ml); err != nil {
		r.logf("list machines out of service: %v", err)
		return
	}
	r.add(phase, key, "machines out of service", float64(len(ml.Machines)), "machines")
	reasons := map[string]int{}
	for _, m := range ml.Machines {
		// "… within 15m0s (last: gpu-dp-6 of cluster c-… at …)": the
		// same reason for every machine but the last node.
		reason, _, _ := strings.Cut(m.OutOfServiceReason, " (last:")
		if reason == "" {
			reason = "by the operator"
		}
		reasons[reason]++
	}
	for reason, n := range reasons {
		r.rep.Note("%s: %d machines out of service: %s", phase, n, reason)
	}
	if len(ml.Machines) > 0 {
		r.logf("%s: %d machines out of service", phase, len(ml.Machines))
	}
}

func describeParts(parts []BurstPart) string {
	var s []string
	for _, p := range parts {
		s = append(s, fmt.Sprintf("%s (fill %d, reclaim %d)", p.Partition, p.Fill, p.Reclaim))
	}
	return strings.Join(s, ", ")
}

type createResult struct {
	lat      Summary
	failed   int
	firstErr string
	ids      []string
}

// createAll creates specs at once, one client each.
func (r *run) createAll(ctx context.Context, specs []ClusterSpec) createResult {
	var (
		lat Latencies
		mu  sync.Mutex
		res createResult
		wg  sync.WaitGroup
	)
	for _, s := range specs {
		wg.Add(1)
		go func(s ClusterSpec) {
			defer wg.Done()
			c := newClient(r.srv.URL, *flagRequestTimeout)
			defer c.close()
			body := createClusterRequest{ClusterName: s.Name, Region: s.Partition.Region, GPUType: s.Partition.GPUType,
				ClusterType: "KUBERNETES", BillingType: s.Billing, NumGPUs: s.NumGPUs, NumPreemptibleGPUs: s.NumPreemptibleGPUs, ProjectID: s.Project}
			var out apiCluster
			t0 := time.Now()
			err := c.do(ctx, "POST", "/v1/clusters", r.tokens[s.Project], body, &out)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lat.Err()
				res.failed++
				if res.firstErr == "" {
					res.firstErr = fmt.Sprintf("%s: %v", s.Name, err)
				}
				return
			}
			lat.Add(d)
			res.ids = append(res.ids, out.ClusterID)
		}(s)
	}
	wg.Wait()
	res.lat = lat.Summary()
	return res
}

// ---- event census ----

// censusReasons are the lifecycle events counted at the end of the run.
var censusReasons = []string{"NodeAdded", "PreemptionNotified", "ScaledDown", "NodeDrained", "NodeRemoved",
	"NodeLost", "RegistrationFailed", "ProvisionFailed", "DeprovisionFailed"}

// eventCensus reads every created cluster's lifecycle events and counts
// them by reason: node churn (registration failures, lost nodes) shows
// here, not in the node counts. Events are kept one per (node, reason).
func (r *run) eventCensus(ctx context.Context) {
	if len(r.created) == 0 || r.srv.Exited() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	ids := make(chan created)
	var (
		mu     sync.Mutex
		counts = map[string]int{}
		failed int
		wg     sync.WaitGroup
	)
	for w := 0; w < *flagReadClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(r.srv.URL, *flagRequestTimeout)
			defer c.close()
			for cl := range ids {
				local := map[string]int{}
				cursor := "0"
				for {
					var page struct {
						Events []struct {
							Reason string `json:"reason"`
						} `json:"node_lifecycle_events"`
						NextCursor string `json:"next_cursor"`
					}
					if err := c.do(ctx, "GET", "/v1/clusters/"+cl.ID+"/events?limit=1000&cursor="+cursor, r.tokens[cl.Project], nil, &page); err != nil {
						mu.Lock()
						failed++
						mu.Unlock()
						break
					}
					for _, e := range page.Events {
						local[e.Reason]++
					}
					if len(page.Events) == 0 || page.NextCursor == cursor {
						break
					}
					cursor = page.NextCursor
				}
				mu.Lock()
				for k, v := range local {
					counts[k] += v
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, cl := range r.created {
		select {
		case ids <- cl:
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	if failed > 0 {
		r.rep.Note("event census: %d clusters' events could not be read", failed)
	}
	for _, reason := range censusReasons {
		r.add("events", "events-"+reason, "lifecycle events of the main clusters: "+reason, float64(counts[reason]), "events")
	}
	r.logf("event census of %d clusters in %s: %v", len(r.created), time.Since(start).Round(time.Millisecond), counts)
}

// ---- stop ----

func (r *run) stop() {
	pid := r.srv.Pid()
	if hwm, err := ProcStatusKB(pid, "VmHWM"); err == nil {
		r.peakRSS = hwm
		r.add("stop", "peak-rss-mib", "server peak RSS (VmHWM)", mib(hwm), "MiB")
	}
	if c, err := ProcCPU(pid); err == nil {
		r.add("stop", "cpu-total-s", "server CPU over the whole run", c.Seconds(), "CPU-s")
	}
	d, err := r.srv.Stop(time.Minute)
	r.add("stop", "stop-s", "SIGTERM to exit", d.Seconds(), "s")
	if err != nil {
		r.errorf("stop the server: %v", err)
	}
	if size, err := DirSize(r.dir, LogName); err == nil {
		r.add("stop", "data-dir-mib", "data directory size (without the log)", mib(size), "MiB")
	}
	if r.db == nil {
		var db int64
		for _, f := range []string{"sparecap.db", "sparecap.db-wal"} {
			if info, err := os.Stat(filepath.Join(r.dir, f)); err == nil {
				db += info.Size()
			}
		}
		r.add("stop", "db-mib", "SQLite file size (+WAL)", mib(db), "MiB")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if size, err := r.db.Size(ctx); err == nil {
			r.add("stop", "db-mib", "PostgreSQL database size", mib(size), "MiB")
		}
		cancel()
	}
	if info, err := os.Stat(filepath.Join(r.dir, "sim-state.json")); err == nil {
		r.add("stop", "sim-state-mib", "sim-state.json size", mib(info.Size()), "MiB")
	}
}
