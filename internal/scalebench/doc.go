// Package scalebench is a whole-system scale benchmark of the real
// `sparecap server` binary, driven over HTTP by concurrent clients, so the
// same harness can be pointed at two versions of the server and their
// figures compared side by side. It tests nothing about correctness; it
// measures. Run it with `make bench-scale` (SQLite, then PostgreSQL) or:
//
//	go test -run '^$' -bench BenchmarkServerScale -benchtime 1x -timeout 60m \
//	    ./internal/scalebench/ -args -gpus 96000 -db sqlite
//
// # The world
//
// A fleet file is generated with GPUs/8 machines of 8 GPUs, split evenly
// over 4 regions × 4 GPU types (16 partitions). In each partition a fifth
// of the machines is a reservation held by one of 4 projects (project j
// holds GPU type j in every region); the rest is the on-demand pool. The
// four GPU types are priced. 96,000 GPUs are 12,000 machines, 750 per
// partition (600 on demand, 150 reserved).
//
// Then, through the API only: one project per 50 clusters (20 projects for
// the default 1,000 clusters, so GET /v1/clusters of one project lists
// exactly 50; the 4 reservation projects, created by the fleet file, get
// their token from POST /v1/admin/projects/{id}/tokens), and the clusters,
// created with the projects' own tokens by -clients concurrent clients
// (each a goroutine with its own http.Client and keep-alive), cluster i in
// project i/50 and partition i%16. Each has 8–16 standard GPUs and a
// preemptible target chosen so that the nodes asked for add up to about
// half the fleet's machines (24–48 preemptible GPUs at the default shape:
// about 1,500 standard and 4,500 preemptible nodes). Clusters of a project
// that holds the partition's reservation are RESERVED (about 5%, -reserved),
// the others ON_DEMAND. Standard demand always fits; spare capacity is not
// contended at this shape until the burst (below) takes the on-demand pool.
//
// # What is measured
//
// Every figure is reported with b.ReportMetric, printed as a table, and
// written as JSON to -out when it is set. Times are wall-clock unless a
// figure says "server s" (the server's clock runs -speed times faster).
//
//   - start: from exec to /healthz and /readyz answering 200 (the fleet is
//     registered before the server listens).
//   - creates: latency of each POST /v1/clusters (p50, p99, max), their
//     rate over the whole create phase, and 409 insufficient_capacity
//     refusals and other errors counted apart (there should be none).
//   - convergence: from the last create's answer until every standard node
//     is ready, no node is pending, provisioning, draining or removing, and
//     no target is unfulfilled for Provisioning or CoolingDown (any other
//     reason is stable), seen on two scrapes of /metrics in a row
//     (sparecap_nodes, sparecap_targets_unfulfilled), polled every 2 s.
//     Also the time until all standard nodes are ready, the node counts,
//     the server's CPU seconds over create phase and convergence, and the
//     reclaims started meanwhile (RESERVED clusters take back idle
//     reserved machines that were lent as preemptible), and the machines
//     out of service then (sparecap retires a machine after three nodes in
//     a row failed to register within --register-timeout, which is 15 s of
//     wall time at --speed 60). A fleet that does not converge reports
//     converge-gave-up-s instead of converge-s, and the phases below are
//     measured on a fleet still at work (noted in the report).
//   - settled CPU: the server's utime+stime from /proc/<pid>/stat over
//     -cpu-duration (30 s) with no client running, as percent of one core,
//     and its RSS then.
//   - reads: -read-clients clients for -read-duration (20 s) doing GET
//     /v1/clusters/{id} on random clusters with their project's token; then
//     as many doing GET /v1/clusters of a project with 50 clusters. Rate,
//     p50, p99, max, errors.
//   - burst: the reclaim path at scale. The admin machine listing tells,
//     per partition, the free on-demand machines and those lent to
//     preemptible nodes. Partitions are picked until their lent on-demand
//     machines cover -burst; first each gets a "fill" cluster taking its
//     free on-demand machines (not timed as the burst; waited for until its
//     nodes are ready), so that the burst itself, one standard-only cluster
//     per picked partition created at once, must reclaim exactly -burst
//     preemptible nodes. From the moment those creates are sent, /metrics
//     is scraped every 200 ms: the wall time until the notices delivered
//     (the count of sparecap_notice_fanout_seconds, one observation per
//     node whose T+0 actions were all delivered) cover every drain started
//     (sparecap_reclaims_started_total, all causes; fair-share rebalancing
//     may add a few) is the wall-clock figure. The histogram's own view is
//     reported too, from the difference of its buckets before and after:
//     its highest bucket reached, p50/p99 bucket bounds and mean, in server
//     seconds and converted to wall seconds (÷ speed). The controller
//     records no notice for a drain whose deadline passed before its T+0
//     actions were all delivered, so notices can be missing: the run then
//     stops waiting once every drain started has ended
//     (sparecap_reclaims_finished_total), and reports how many drains
//     ended without a notice, when the last notice was seen and when the
//     last drain ended (early or at the deadline). Then the time until the
//     burst's standard nodes are all ready and the fleet has settled again
//     (hand-over, -handover-timeout).
//   - events: every main cluster's lifecycle events, counted by reason
//     (node churn such as RegistrationFailed shows here, not in the node
//     counts).
//   - stop: the server's peak RSS (VmHWM from /proc/<pid>/status, read just
//     before SIGTERM), the time it takes to exit after SIGTERM, and the
//     size of the data directory (and of the PostgreSQL database).
//
// The load generator runs on the same machine as the server and the
// database and takes CPU from them; the figures are for side-by-side
// comparison on one machine, not absolute capacity.
//
// # PostgreSQL
//
// With -db postgres a fresh database scalebench_<random> is created on
// $SPARECAP_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test,
// trust auth) and dropped after the run, unless -keep.
//
// # Failure
//
// Every wait is bounded. A phase that fails or times out is reported with
// b.Errorf and the run goes on with what can still be measured; the tail of
// the server's log (server.log in the data directory) is printed on any
// failure. If the fleet does not converge within -converge-timeout, the
// burst is skipped (it plans on a settled fleet). SIGINT or SIGTERM to the
// test binary ends the run early, still printing and writing what was
// measured; -out is also rewritten after every phase. -keep keeps the data
// directory (and database) and prints where.
package scalebench
