// Package metrics exposes sparecap's Prometheus metrics.
//
// State metrics (preemptible targets, nodes, unmet targets) are computed at
// scrape time from one store snapshot, so they always agree with the store,
// also right after a restart. Reclaim metrics count the controller's
// observations (plug Observe into controller.Controller.Observer); they
// start from zero in each process, as Prometheus counters do. Billed
// GPU-seconds are added by the metering code, API latency by Middleware.
//
// Durations of the reclaim path are measured on the controller's clock:
// under --speed N they are simulated seconds, like the drain window.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/clock"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Namespace prefixes every sparecap metric.
const Namespace = "sparecap"

// SnapshotTimeout bounds the store read of one scrape.
const SnapshotTimeout = 10 * time.Second

// Buckets of the histograms, in seconds.
var (
	// DrainBuckets reach past the default 5-minute window: drains that end
	// at the deadline land at 300s (a pass or two later in real time).
	DrainBuckets = []float64{1, 5, 10, 15, 30, 45, 60, 90, 120, 150, 180, 210, 240, 270, 290, 300, 302, 310, 330, 360, 600, 900}
	// NoticeBuckets: the T+0 fan-out is a handful of Kubernetes API calls.
	NoticeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// RequestBuckets: API request latency.
	RequestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// Metrics holds sparecap's metrics and the registry that serves them.
// Create it with New.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	// own lists the collectors New registers under the sparecap_ prefix.
	own []prometheus.Collector

	reclaimsStarted  *prometheus.CounterVec
	reclaimsFinished *prometheus.CounterVec
	drainDuration    *prometheus.HistogramVec
	noticeLatency    prometheus.Histogram
	billed           *prometheus.CounterVec
	pruned           *prometheus.CounterVec
	tableRows        *prometheus.GaugeVec
	tableBytes       *prometheus.GaugeVec
	storageUsed      *prometheus.GaugeVec
	storageQuota     *prometheus.GaugeVec
	requests         *prometheus.HistogramVec
	budgets          budgetGauges
	lending          *lendingCollector
	// wall times the requests: their latency is wall time, whatever
	// speed the controller's clock runs at.
	wall clock.Clock
}

// New returns the metrics of a sparecap process reading state from st, on
// a registry of their own that also holds the Go runtime and process
// collectors, timing requests on wall. With a nil st the state metrics
// are left out.
func New(st store.Store, wall clock.Clock) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), wall: wall}
	m.reclaimsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reclaims_started_total",
		Help: "Drains started (T+0 committed: the node is draining with a deadline), by cause: preempted, fair_share, out_of_service (reclaims) or scaled_down, cluster_deleted (tenant-initiated).",
	}, []string{"cause"})
	m.reclaimsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reclaims_finished_total",
		Help: "Drains finished (the node left draining for removal), by cause and outcome: early (all pods exited before the deadline) or deadline (removed at the deadline, remaining pods force-deleted).",
	}, []string{"cause", "outcome"})
	m.drainDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "drain_duration_seconds",
		Help:    "Time from T+0 (drain committed) to the node being drained, in controller clock seconds, by outcome (early or deadline).",
		Buckets: DrainBuckets,
	}, []string{"outcome"})
	m.noticeLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "notice_fanout_seconds",
		Help:    "Time from T+0 (drain intent committed) until every T+0 action (cordon, taint, deadline annotation, Kubernetes Event, SIGTERM to pods) was delivered and recorded, in controller clock seconds.",
		Buckets: NoticeBuckets,
	})
	m.billed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "billed_gpu_seconds_total",
		Help: "GPU-seconds billed to tenants, by compute class (standard or preemptible).",
	}, []string{"class"})
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "API request latency in seconds, by method, route pattern (\"unmatched\" when no route took the request) and status code. Event streams (SSE) count their whole duration.",
		Buckets: RequestBuckets,
	}, []string{"method", "route", "code"})

	// Series that should exist before their first event, so dashboards and
	// rate() see zeros rather than nothing.
	for _, c := range []domain.DrainCause{domain.CausePreempted, domain.CauseFairShare, domain.CauseOutOfService, domain.CauseScaledDown, domain.CauseClusterDeleted} {
		m.reclaimsStarted.WithLabelValues(string(c))
		for _, o := range []domain.DrainOutcome{domain.OutcomeEarly, domain.OutcomeDeadline} {
			m.reclaimsFinished.WithLabelValues(string(c), string(o))
		}
	}
	for _, o := range []domain.DrainOutcome{domain.OutcomeEarly, domain.OutcomeDeadline} {
		m.drainDuration.WithLabelValues(string(o))
	}
	for _, c := range []domain.ComputeClass{domain.Standard, domain.Preemptible} {
		m.billed.WithLabelValues(string(c))
	}
	m.budgets = newBudgetGauges()
	for _, k := range []string{domain.AlertSpend, domain.AlertForecast, domain.AlertChange} {
		m.budgets.alerts.WithLabelValues(k)
	}
	m.pruned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "retention_pruned_rows_total",
		Help: "Rows the retention deleted, by table, for being older than the table's retention (docs/operations.md).",
	}, []string{"table"})
	m.pruned.WithLabelValues("budget_alerts")
	m.tableRows, m.tableBytes = tableGauges()
	m.storageUsed, m.storageQuota = storageGauges()

	m.own = []prometheus.Collector{
		m.reclaimsStarted, m.reclaimsFinished, m.drainDuration, m.noticeLatency, m.billed, m.requests,
		m.budgets.spend, m.budgets.forecast, m.budgets.amount, m.budgets.alerts, m.pruned, m.tableRows, m.tableBytes,
		m.storageUsed, m.storageQuota,
	}
	if st != nil {
		m.lending = newLendingCollector(st, wall)
		m.own = append(m.own, newStateCollector(st), m.lending)
	}
	m.reg.MustRegister(m.own...)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failed store read drops the state metrics (and sets
		// sparecap_store_up to 0) but serves everything else.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slogErrorLog{},
		Registry:      m.reg,
	})
	return m
}

// SetPriceClock sets the clock the lending metrics price nodes at (the
// controller's: under --speed the price book's entries are in simulated
// time); wall by default. Call it before serving.
func (m *Metrics) SetPriceClock(c clock.Clock) {
	if m.lending != nil {
		m.lending.clock = c
	}
}

// Registry returns the registry the metrics are served from, for tests and
// for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats (mount it
// at GET /metrics).
func (m *Metrics) Handler() http.Handler { return m.handler }

// Observe counts a controller observation. Set it as the controller's
// Observer (or combine it with others through controller.Observers).
func (m *Metrics) Observe(o controller.Observation) {
	switch o.Kind {
	case controller.KindDrainStarted:
		m.reclaimsStarted.WithLabelValues(string(o.Cause)).Inc()
	case controller.KindNoticeDelivered:
		if !o.DrainStartedAt.IsZero() && !o.Time.IsZero() {
			m.noticeLatency.Observe(seconds(o.Time.Sub(o.DrainStartedAt)))
		}
	case controller.KindDrainFinished:
		m.reclaimsFinished.WithLabelValues(string(o.Cause), string(o.Outcome)).Inc()
		if !o.DrainStartedAt.IsZero() && !o.Time.IsZero() {
			m.drainDuration.WithLabelValues(string(o.Outcome)).Observe(seconds(o.Time.Sub(o.DrainStartedAt)))
		}
	}
}

func seconds(d time.Duration) float64 { return max(d.Seconds(), 0) }

// AddBilledGPUSeconds adds v GPU-seconds billed in compute class class
// ("standard" or "preemptible"). Negative, NaN and infinite values are
// ignored: a counter only goes up.
func (m *Metrics) AddBilledGPUSeconds(class string, v float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	m.billed.WithLabelValues(class).Add(v)
}

// Middleware records the latency of each request next serves, by method,
// the route pattern the ServeMux inside next matched (Request.Pattern,
// read after next returns) and status code.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := m.wall.Now()
		// A shallow copy with no pattern: an outer mux may have set one
		// already, and only the pattern next's own mux sets is the route.
		r = r.WithContext(r.Context())
		r.Pattern = ""
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(methodLabel(r.Method), routeLabel(r.Pattern), strconv.Itoa(status)).Observe(m.wall.Now().Sub(start).Seconds())
	})
}

// methodLabel keeps the method label's values few.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// routeLabel is the pattern without its method (the method has a label of
// its own): "GET /v1/clusters/{id}" → "/v1/clusters/{id}".
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		pattern = strings.TrimLeft(pattern[i:], " \t")
	}
	return pattern
}

// recorder notes the status code and passes flushes on (event streams
// need them).
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// slogErrorLog logs the handler's errors (a failed store read) through
// the default slog logger.
type slogErrorLog struct{}

func (slogErrorLog) Println(v ...any) {
	slog.Error("serving metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// stateCollector computes the state metrics from one store snapshot per
// scrape.
type stateCollector struct {
	st          store.Store
	up          *prometheus.Desc
	desired     *prometheus.Desc
	allocated   *prometheus.Desc
	nodes       *prometheus.Desc
	unfulfilled *prometheus.Desc
}

func newStateCollector(st store.Store) *stateCollector {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	return &stateCollector{
		st: st,
		up: prometheus.NewDesc(name("store_up"),
			"1 if this scrape read the store snapshot the state metrics come from, 0 if the read failed (the state metrics are then missing).", nil, nil),
		desired: prometheus.NewDesc(name("cluster_desired_preemptible_gpus"),
			"Preemptible GPU target sparecap fills for each cluster (target_preemptible_gpus: desired_preemptible_gpus, or what its queue's ProvisioningRequests ask for within max_preemptible_gpus when that is more); clusters being deleted included until they are gone.", []string{"cluster_id", "project_id"}, nil),
		allocated: prometheus.NewDesc(name("cluster_allocated_preemptible_gpus"),
			"Preemptible GPUs of each cluster on ready nodes (allocated_preemptible_gpus); nodes provisioning or draining do not count.", []string{"cluster_id", "project_id"}, nil),
		nodes: prometheus.NewDesc(name("nodes"),
			"Nodes not yet removed, by compute class (standard, preemptible) and state (pending, provisioning, ready, draining, removing).", []string{"class", "state"}, nil),
		unfulfilled: prometheus.NewDesc(name("targets_unfulfilled"),
			"Clusters whose allocated preemptible GPUs are below their target, by the reason the API reports (Provisioning, NoSpareCapacity, FairShare, CoolingDown, WaitingForLease).", []string{"reason"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.desired
	ch <- c.allocated
	ch <- c.nodes
	ch <- c.unfulfilled
}

var (
	classes      = []domain.ComputeClass{domain.Standard, domain.Preemptible}
	nodeStates   = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining, domain.NodeRemoving}
	unmetReasons = []domain.UnfulfilledReason{domain.UnfulfilledProvisioning, domain.UnfulfilledNoCapacity, domain.UnfulfilledFairShare, domain.UnfulfilledCoolingDown,
		domain.UnfulfilledWaitingForLease}
)

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), SnapshotTimeout)
	defer cancel()
	s, err := c.st.Snapshot(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		ch <- prometheus.NewInvalidMetric(c.desired, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)

	type classState struct {
		class domain.ComputeClass
		state domain.NodeState
	}
	nodes := map[classState]int{}
	for _, cl := range classes {
		for _, st := range nodeStates {
			nodes[classState{cl, st}] = 0
		}
	}
	ready := map[string]int{} // cluster → GPUs on ready preemptible nodes
	for _, n := range s.Nodes {
		if n.State == domain.NodeRemoved {
			continue
		}
		nodes[classState{n.Class, n.State}]++
		if n.Class == domain.Preemptible && n.State == domain.NodeReady {
			ready[n.ClusterID] += n.GPUs
		}
	}
	keys := make([]classState, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].class != keys[j].class {
			return keys[i].class < keys[j].class
		}
		return keys[i].state < keys[j].state
	})
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(nodes[k]), string(k.class), string(k.state))
	}

	unmet := map[domain.UnfulfilledReason]int{}
	for _, r := range unmetReasons {
		unmet[r] = 0
	}
	for _, cl := range s.Clusters {
		if !cl.DeletedAt.IsZero() {
			continue
		}
		alloc := ready[cl.ID]
		ch <- prometheus.MustNewConstMetric(c.desired, prometheus.GaugeValue, float64(cl.TargetPreemptibleGPUs()), cl.ID, cl.ProjectID)
		ch <- prometheus.MustNewConstMetric(c.allocated, prometheus.GaugeValue, float64(alloc), cl.ID, cl.ProjectID)
		if r := unmetReason(cl, alloc); r != "" {
			unmet[r]++
		}
	}
	reasons := make([]domain.UnfulfilledReason, 0, len(unmet))
	for r := range unmet {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool { return reasons[i] < reasons[j] })
	for _, r := range reasons {
		ch <- prometheus.MustNewConstMetric(c.unfulfilled, prometheus.GaugeValue, float64(unmet[r]), string(r))
	}
}

// unmetReason is the reason the API reports for a cluster below its
// target (see api.clusterView): the stored one, or Provisioning while the
// stored state lags a node that just changed; "" when the target is met or
// the cluster is being deleted.
func unmetReason(cl domain.Cluster, allocated int) domain.UnfulfilledReason {
	if allocated >= cl.TargetPreemptibleGPUs() {
		return ""
	}
	if cl.Unfulfilled != "" {
		return cl.Unfulfilled
	}
	if cl.Status != domain.StatusDeleting {
		return domain.UnfulfilledProvisioning
	}
	return ""
}

// budgetGauges are the gauges of the budgets' last check.
type budgetGauges struct {
	spend, forecast, amount *prometheus.GaugeVec
	alerts                  *prometheus.CounterVec
}

func newBudgetGauges() budgetGauges {
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, []string{"project", "budget"})
	}
	return budgetGauges{
		spend:    g("budget_spend_dollars", "A budget's spend this month so far, in dollars, at the last check (after each metering pass)."),
		forecast: g("budget_forecast_dollars", "A budget's forecast spend at the end of this month, in dollars."),
		amount:   g("budget_amount_dollars", "A budget's monthly amount, in dollars."),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "budget_alerts_total",
			Help: "Budget alerts raised, by kind: spend (a threshold crossed), forecast (the month-end forecast reaches the budget) or change (a day's spend jumped)."},
			[]string{"kind"}),
	}
}

// ObserveBudgets sets the budget gauges to the statuses of a check; a
// budget not among them (deleted) has its series removed.
func (m *Metrics) ObserveBudgets(all []budget.Status) {
	for _, v := range []*prometheus.GaugeVec{m.budgets.spend, m.budgets.forecast, m.budgets.amount} {
		v.Reset()
	}
	for _, s := range all {
		b := s.Budget
		amount, _ := strconv.ParseFloat(b.Amount, 64)
		m.budgets.spend.WithLabelValues(b.ProjectID, b.Name).Set(s.Spend)
		m.budgets.forecast.WithLabelValues(b.ProjectID, b.Name).Set(s.Forecast)
		m.budgets.amount.WithLabelValues(b.ProjectID, b.Name).Set(amount)
	}
}

// Pruned counts rows the retention deleted from table.
func (m *Metrics) Pruned(table string, n int) { m.pruned.WithLabelValues(table).Add(float64(n)) }

// TableSizes sets the table gauges to sizes.
func (m *Metrics) TableSizes(sizes []store.TableSize) {
	m.tableRows.Reset()
	m.tableBytes.Reset()
	for _, t := range sizes {
		m.tableRows.WithLabelValues(t.Table).Set(float64(t.Rows))
		m.tableBytes.WithLabelValues(t.Table).Set(float64(t.Bytes))
	}
}

// tableGauges are the gauges of the database's tables.
func tableGauges() (rows, bytes *prometheus.GaugeVec) {
	rows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "table_rows",
		Help: "Rows of each table of the database, read hourly by the leader (PostgreSQL: the planner's estimate).",
	}, []string{"table"})
	bytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "table_bytes",
		Help: "Bytes of each table of the database on disk, its indexes included, read hourly by the leader.",
	}, []string{"table"})
	return rows, bytes
}

// storageGauges are the gauges of the projects' storage and quotas.
func storageGauges() (used, quota *prometheus.GaugeVec) {
	used = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "project_storage_bytes",
		Help: "Bytes each project's own input makes the server keep (work spans, budgets and alerts, webhook endpoints and deliveries, tokens), counted by the leader every 10 minutes.",
	}, []string{"project"})
	quota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "project_storage_quota_bytes",
		Help: "Each project's storage quota in bytes: past it its optional writes are refused.",
	}, []string{"project"})
	return used, quota
}

// ProjectStorage sets each project's storage and quota gauges.
func (m *Metrics) ProjectStorage(projects []string, used, quota []int64) {
	m.storageUsed.Reset()
	m.storageQuota.Reset()
	for i, p := range projects {
		m.storageUsed.WithLabelValues(p).Set(float64(used[i]))
		m.storageQuota.WithLabelValues(p).Set(float64(quota[i]))
	}
}

// BudgetAlert counts an alert raised.
func (m *Metrics) BudgetAlert(a domain.BudgetAlert) { m.budgets.alerts.WithLabelValues(a.Kind).Inc() }
