package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/store/postgres"
)

// The failover tests run several servers on one PostgreSQL schema, at the
// real clock's speed (the replicas share no clock anchor). The database
// itself audits every committed write to nodes, events and usage: a
// trigger records the application_name of the connection that wrote (each
// replica's is its own URL) next to the leader lease's address at that
// moment, so a commit by anything but the leader shows.

const (
	failoverRegion = "eu-failover-1"
	otherRegion    = "eu-other-1"
	failoverTTL    = 2 * time.Second
	failoverDrain  = 20 * time.Second
)

const failoverFleet = `
pools:
  - {region: ` + failoverRegion + `, gpu_type: ` + gpuType + `, machines: 24}
  - {region: ` + otherRegion + `, gpu_type: ` + gpuType + `, machines: 6}
prices:
  ` + gpuType + `: "2.99"
`

const auditSQL = `
CREATE TABLE audit (app TEXT, leader TEXT, tbl TEXT, at TIMESTAMPTZ DEFAULT clock_timestamp());
CREATE FUNCTION audit_write() RETURNS trigger AS $$
BEGIN
	INSERT INTO audit (app, leader, tbl)
	SELECT current_setting('application_name'), address, TG_TABLE_NAME FROM leader WHERE id = 1;
	RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER audit_nodes AFTER INSERT OR UPDATE ON nodes FOR EACH STATEMENT EXECUTE FUNCTION audit_write();
CREATE TRIGGER audit_events AFTER INSERT OR UPDATE ON events FOR EACH STATEMENT EXECUTE FUNCTION audit_write();
CREATE TRIGGER audit_usage AFTER INSERT OR UPDATE ON usage FOR EACH STATEMENT EXECUTE FUNCTION audit_write();
`

// withAppName sets application_name in a URL or keyword/value DSN.
func withAppName(t *testing.T, dsn, name string) string {
	t.Helper()
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name
}

type replicaSet struct {
	t       *testing.T
	servers []*server
	db      *sql.DB
}

// startReplicas starts n servers on dsn; the first one migrates the schema
// and the audit is installed before the others start.
func startReplicas(t *testing.T, dir, dsn string, n int) *replicaSet {
	dsns := make([]string, n)
	for i := range dsns {
		dsns[i] = dsn
	}
	return startReplicasOn(t, dir, dsn, dsns)
}

// startReplicasOn starts a server per entry of dsns (each its own way to
// the database of dsn, which the test reads directly).
func startReplicasOn(t *testing.T, dir, dsn string, dsns []string) *replicaSet {
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, failoverFleet)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rs := &replicaSet{t: t, db: db}
	for i, dsn := range dsns {
		addr := freeAddr(t)
		s := startServer(t, serverConfig{
			DataDir:    filepath.Join(dir, fmt.Sprintf("data-%d", i)),
			DB:         withAppName(t, dsn, "http://"+addr),
			FleetFile:  fleetFile,
			Speed:      1,
			SimSeed:    crashSeed,
			Addr:       addr,
			ConfigPath: filepath.Join(dir, fmt.Sprintf("cli-%d.yaml", i)),
			Extra: []string{"--lease-ttl", failoverTTL.String(), "--drain-window", failoverDrain.String(),
				"--provision-time", "1s", "--cooldown", "0"},
		})
		rs.servers = append(rs.servers, s)
		if i == 0 {
			if _, err := db.Exec(auditSQL); err != nil {
				t.Fatalf("install the write audit: %v", err)
			}
		}
	}
	return rs
}

// role asks a server whether it leads.
func role(s *server) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "down"
	}
	defer resp.Body.Close()
	var body struct{ Role string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Role
}

// leader waits for exactly one live server to lead and returns it.
func (rs *replicaSet) leader(timeout time.Duration, except ...*server) (*server, time.Duration) {
	rs.t.Helper()
	start := time.Now()
	for {
		var leaders []*server
		for _, s := range rs.servers {
			if !contains(except, s) && role(s) == "leader" {
				leaders = append(leaders, s)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], time.Since(start)
		}
		if time.Since(start) > timeout {
			rs.t.Fatalf("no single leader after %s (%d lead)", timeout, len(leaders))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(ss []*server, s *server) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// checkAudit fails the test if anything but the leader committed a write.
func (rs *replicaSet) checkAudit() {
	rs.t.Helper()
	var bad, total int
	if err := rs.db.QueryRow(`SELECT count(*) FILTER (WHERE app <> leader), count(*) FROM audit`).Scan(&bad, &total); err != nil {
		rs.t.Fatalf("read the audit: %v", err)
	}
	if total == 0 {
		rs.t.Fatal("the audit recorded no write at all: it does not work")
	}
	if bad > 0 {
		rows, _ := rs.db.Query(`SELECT app, leader, tbl, at FROM audit WHERE app <> leader ORDER BY at LIMIT 10`)
		var lines []string
		for rows != nil && rows.Next() {
			var app, leader, tbl string
			var at time.Time
			_ = rows.Scan(&app, &leader, &tbl, &at)
			lines = append(lines, fmt.Sprintf("%s wrote %s at %s while %q led", app, tbl, at.Format(time.RFC3339Nano), leader))
		}
		rs.t.Fatalf("%d of %d audited writes were committed by a server that was not leader:\n%s", bad, total, strings.Join(lines, "\n"))
	}
	rs.t.Logf("audit: all %d committed writes were the leader's", total)
}

// doubleAssigned counts machines with more than one live node right now.
func (rs *replicaSet) doubleAssigned() (int, error) {
	var n int
	err := rs.db.QueryRow(`SELECT count(*) FROM (SELECT machine_id FROM nodes
		WHERE state IN ('provisioning', 'ready', 'draining', 'removing') GROUP BY machine_id HAVING count(*) > 1) d`).Scan(&n)
	return n, err
}

// resilientWatch streams a cluster's events from one server after
// another: when a stream breaks it resumes, from the last cursor it got,
// on the next server that answers.
type resilientWatch struct {
	mu   sync.Mutex
	seen map[string]bool // cursors
	// reconnects counts resumed streams.
	reconnects int
}

func startResilientWatch(t *testing.T, servers []*server, token, clusterID, cursor string, first int) *resilientWatch {
	w := &resilientWatch{seen: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		i := first
		for ctx.Err() == nil {
			c := apiClient(t, servers[i%len(servers)].URL, token)
			_ = c.WatchEvents(ctx, clusterID, cursor, func(e apiv1.Event) error {
				w.mu.Lock()
				w.seen[e.Cursor] = true
				cursor = e.Cursor
				w.mu.Unlock()
				return nil
			})
			w.mu.Lock()
			w.reconnects++
			w.mu.Unlock()
			i++
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

func (w *resilientWatch) missing(evs []apiv1.Event) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range evs {
		if !w.seen[e.Cursor] {
			out = append(out, fmt.Sprintf("%s %s (cursor %s)", e.Reason, e.NodeName, e.Cursor))
		}
	}
	return out
}

type drainRow struct {
	name              string
	state             string
	deadline, drained sql.NullTime
}

func (rs *replicaSet) drains(clusterID string) []drainRow {
	rs.t.Helper()
	rows, err := rs.db.Query(`SELECT name, state, deadline, drained_at FROM nodes
		WHERE cluster_id = $1 AND drain_started_at IS NOT NULL ORDER BY name`, clusterID)
	if err != nil {
		rs.t.Fatal(err)
	}
	defer rows.Close()
	var out []drainRow
	for rows.Next() {
		var d drainRow
		if err := rows.Scan(&d.name, &d.state, &d.deadline, &d.drained); err != nil {
			rs.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestFailover: three servers on PostgreSQL; the leader is SIGKILLed just
// after 20 preemptible nodes were reclaimed. A follower takes over within
// 5 seconds, every drain ends by its original deadline, no machine ever
// has two live nodes, SSE clients resuming with their cursor on another
// server miss no event, creates sent to any server during the failover
// succeed or fail cleanly, and nothing but the leader ever commits.
func TestFailover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rs := startReplicas(t, dir, postgres.TestDSN(t), 3)
	lead, _ := rs.leader(10 * time.Second)
	var follower *server
	for _, s := range rs.servers {
		if s != lead {
			follower = s
			break
		}
	}
	// Everything goes through a follower: its writes are forwarded.
	var projA, projB apiv1.Project
	cliJSON(t, follower, adminToken, &projA, "projects", "create", "team-a", "-o", "json")
	cliJSON(t, follower, adminToken, &projB, "projects", "create", "team-b", "-o", "json")
	tenantA := apiClient(t, follower.URL, projA.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clA, err := tenantA.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "training", Region: failoverRegion, GPUType: gpuType,
		NumGPUs: 8, NumPreemptibleGPUs: 23 * 8})
	if err != nil {
		t.Fatalf("create through a follower: %v", err)
	}
	waitCluster(t, tenantA, clA.ClusterID, 2*time.Minute, "23 preemptible nodes ready", func(c *apiv1.Cluster) bool {
		return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 23*8
	})
	// Usage read through a follower is the leader's, metered to the
	// second: every node of the cluster is on it.
	// (The last node may have become ready less than a second ago.)
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		u, err := tenantA.Usage(ctx, client.UsageQuery{From: clA.CreatedAt.Add(-time.Hour), To: clA.CreatedAt.Add(24 * time.Hour)})
		if err != nil {
			t.Fatalf("usage through a follower: %v", err)
		}
		billed := map[string]bool{}
		for _, l := range u.LineItems {
			if l.GPUSeconds > 0 {
				billed[l.NodeID] = true
			}
		}
		if len(billed) == 24 {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("usage through a follower bills %d nodes, want the cluster's 24 ready nodes: %+v", len(billed), u.LineItems)
		}
	}
	_, cursor := allEvents(t, apiClient(t, follower.URL, adminToken), clA.ClusterID, "")
	var watches []*resilientWatch
	for i := range rs.servers {
		watches = append(watches, startResilientWatch(t, rs.servers, projA.Token, clA.ClusterID, cursor, i))
	}

	// The database is checked for double assignment throughout.
	var violations []string
	var vmu sync.Mutex
	stopCheck := make(chan struct{})
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for {
			n, err := rs.doubleAssigned()
			if err == nil && n > 0 {
				vmu.Lock()
				violations = append(violations, fmt.Sprintf("%s: %d machines with two live nodes", time.Now().Format(time.RFC3339Nano), n))
				vmu.Unlock()
			}
			select {
			case <-stopCheck:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// The reclaim: team-b takes 20 machines of standard capacity.
	clB, err := apiClient(t, follower.URL, projB.Token).CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "burst",
		Region: failoverRegion, GPUType: gpuType, NumGPUs: 20 * 8})
	if err != nil {
		t.Fatalf("team-b's burst: %v", err)
	}
	lead.kill()
	killedAt := time.Now()
	if got := len(rs.drains(clA.ClusterID)); got != 20 {
		t.Fatalf("%d nodes of team-a drain; want 20", got)
	}

	// Creates sent to every server while the leader is gone.
	var creates createLog
	var cwg sync.WaitGroup
	for i, s := range rs.servers {
		if s == lead {
			continue // dead: its clients get connection refused
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			c := apiClient(t, s.URL, projB.Token)
			for j := 0; time.Since(killedAt) < 8*time.Second; j++ {
				creates.create(c, apiv1.CreateClusterRequest{ClusterName: fmt.Sprintf("during-%d-%d", i, j),
					Region: otherRegion, GPUType: gpuType, NumGPUs: 8}, 15*time.Second)
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}

	newLead, _ := rs.leader(10*time.Second, lead)
	takeover := time.Since(killedAt)
	t.Logf("a follower led %s after the leader was killed", takeover.Round(time.Millisecond))
	if takeover > 5*time.Second+time.Second { // 1s: how often this test polls, and the kill itself
		t.Errorf("takeover took %s; want within 5s", takeover)
	}
	cwg.Wait()

	// Every drain ends by its original deadline.
	deadline := time.Now().Add(failoverDrain + 30*time.Second)
	for {
		ds := rs.drains(clA.ClusterID)
		done := 0
		for _, d := range ds {
			if d.state == "removed" {
				done++
			}
		}
		if done == len(ds) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drains still running long after their deadline: %+v", ds)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tolerance := time.Second // the controller's interval at speed 1
	for _, d := range rs.drains(clA.ClusterID) {
		if !d.drained.Valid || !d.deadline.Valid {
			t.Errorf("node %s: removed without drained_at/deadline: %+v", d.name, d)
			continue
		}
		if late := d.drained.Time.Sub(d.deadline.Time); late > tolerance {
			t.Errorf("node %s drained %s after its deadline (tolerance %s)", d.name, late, tolerance)
		}
	}
	waitCluster(t, apiClient(t, newLead.URL, projB.Token), clB.ClusterID, time.Minute, "burst Ready", func(c *apiv1.Cluster) bool { return c.Status == "Ready" })
	close(stopCheck)
	<-checked
	if len(violations) > 0 {
		t.Errorf("double assignment seen: %v", violations)
	}

	list, err := apiClient(t, newLead.URL, projB.Token).ListClusters(ctx, client.ListClustersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := creates.check(t, list.Clusters, nil)
	t.Logf("creates during the failover, by status: %v", counts)

	// SSE: every event after the watch's cursor reached every watcher.
	evs, _ := allEvents(t, apiClient(t, newLead.URL, adminToken), clA.ClusterID, cursor)
	if len(evs) < 20 {
		t.Fatalf("only %d events after the reclaim; want at least the 20 notices", len(evs))
	}
	time.Sleep(time.Second) // the followers' streams poll for new events
	for i, w := range watches {
		if m := w.missing(evs); len(m) > 0 {
			t.Errorf("watcher %d (%d reconnects) missed %d of %d events: %v", i, w.reconnects, len(m), len(evs), m)
		}
	}
	rs.checkAudit()
}

// TestPausedLeader: a leader paused past its lease (SIGSTOP) while nodes
// provision, then resumed, commits nothing once a new leader took over
// (the audit), and becomes a follower. The controller re-reads each node
// inside the transaction that moves it, so its resumed steps find the new
// leader's state and mostly do not try; the fence that refuses a stale
// term's commit outright is tested in the store conformance suite
// (Fencing).
func TestPausedLeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rs := startReplicas(t, dir, postgres.TestDSN(t), 2)
	lead, _ := rs.leader(10 * time.Second)
	var other *server
	for _, s := range rs.servers {
		if s != lead {
			other = s
		}
	}
	var proj apiv1.Project
	cliJSON(t, lead, adminToken, &proj, "projects", "create", "team-a", "-o", "json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := apiClient(t, lead.URL, proj.Token)
	cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "training", Region: failoverRegion, GPUType: gpuType,
		NumGPUs: 8, NumPreemptibleGPUs: 10 * 8})
	if err != nil {
		t.Fatal(err)
	}
	// Pause it while its nodes provision (1s): when it resumes, its steps
	// find them ready and try to commit.
	time.Sleep(300 * time.Millisecond)
	if err := lead.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = lead.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	rs.leader(10*time.Second, lead)
	// The new leader acts meanwhile: a scale-down drains nodes.
	if _, err := apiClient(t, other.URL, proj.Token).UpdateCluster(ctx, cl.ClusterID, apiv1.UpdateClusterRequest{NumPreemptibleGPUs: ptr(4 * 8)}); err != nil {
		t.Fatalf("scale down through the new leader: %v", err)
	}
	time.Sleep(2 * time.Second)
	_ = lead.cmd.Process.Signal(syscall.SIGCONT)
	paused = false
	deadline := time.Now().Add(10 * time.Second)
	for role(lead) != "follower" {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed server still says %q", role(lead))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := role(other); r != "leader" {
		t.Fatalf("the new leader says %q after the old one resumed", r)
	}
	waitCluster(t, apiClient(t, other.URL, proj.Token), cl.ClusterID, time.Minute, "4 preemptible nodes", func(c *apiv1.Cluster) bool {
		return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 4*8
	})
	if n, err := rs.doubleAssigned(); err != nil || n > 0 {
		t.Fatalf("double assignment: %d, %v", n, err)
	}
	rs.checkAudit()
	for end := time.Now().Add(5 * time.Second); !strings.Contains(lead.output.String(), "term ends"); {
		if time.Now().After(end) {
			t.Fatal("the resumed server's log does not say its term ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// createOutcome is how one create sent during a fault ended: its HTTP
// status, or -1 for no answer.
type createOutcome struct {
	name string
	code int
	err  error
}

// createLog collects the outcomes of creates sent from several goroutines.
type createLog struct {
	mu       sync.Mutex
	outcomes []createOutcome
}

// create sends one create and records how it ended.
func (l *createLog) create(c *client.Client, req apiv1.CreateClusterRequest, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_, err := c.CreateCluster(ctx, req)
	cancel()
	o := createOutcome{name: req.ClusterName, code: 201, err: err}
	var ae *client.APIError
	if errors.As(err, &ae) {
		o.code = ae.Status
	} else if err != nil {
		o.code = -1
	}
	l.mu.Lock()
	l.outcomes = append(l.outcomes, o)
	l.mu.Unlock()
}

// check fails the test unless every create got a 201 and its cluster is
// in clusters (then created, if set, is called with it), or a clean
// refusal (409: no capacity; 503: no leader or database, retry) that left
// nothing behind unless it said the change may or may not have been
// made. It returns the count of each status.
func (l *createLog) check(t *testing.T, clusters []apiv1.Cluster, created func(apiv1.Cluster)) map[int]int {
	t.Helper()
	byName := map[string]apiv1.Cluster{}
	for _, c := range clusters {
		byName[c.ClusterName] = c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[int]int{}
	for _, o := range l.outcomes {
		counts[o.code]++
		c, exists := byName[o.name]
		switch o.code {
		case 201:
			if !exists {
				t.Errorf("create %s succeeded but the cluster does not exist", o.name)
			} else if created != nil {
				created(c)
			}
		case 409, 503:
			if exists && !strings.Contains(o.err.Error(), "may or may not") {
				t.Errorf("create %s was refused (%v) yet the cluster exists", o.name, o.err)
			}
		default:
			t.Errorf("create %s: %d %v; want 201, 409 or 503", o.name, o.code, o.err)
		}
	}
	return counts
}
