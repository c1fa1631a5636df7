package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/store/postgres"
)

// faultyLink is a TCP proxy between one server and PostgreSQL that can
// drop every connection it carries, and refuse new ones for a while: a
// network that fails under a replica.
type faultyLink struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	blocked bool
}

func newFaultyLink(t *testing.T, target string) *faultyLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &faultyLink{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); l.drop() })
	go l.serve()
	return l
}

func (l *faultyLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		blocked := l.blocked
		l.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns[c], l.conns[up] = true, true
		l.mu.Unlock()
		go func() { io.Copy(up, c); up.Close(); c.Close() }()
		go func() { io.Copy(c, up); up.Close(); c.Close() }()
	}
}

// drop closes every connection the link carries (mid-query and
// mid-transaction alike).
func (l *faultyLink) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// block drops every connection and refuses new ones until unblock.
func (l *faultyLink) block()   { l.mu.Lock(); l.blocked = true; l.mu.Unlock(); l.drop() }
func (l *faultyLink) unblock() { l.mu.Lock(); l.blocked = false; l.mu.Unlock() }

// viaLink rewrites dsn to reach the database through the link.
func viaLink(t *testing.T, dsn string, l *faultyLink) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(l.ln.Addr().String())
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = net.JoinHostPort(host, port)
		return u.String()
	}
	return dsn + " host=" + host + " port=" + port
}

// TestNetworkFaults: two servers on PostgreSQL, the leader's connections
// through a link that fails (every connection dropped mid-work; then the
// database unreachable for longer than the lease). Creates are sent to
// both servers all along. The faults cost availability, never
// correctness: no machine ever has two live nodes, nothing but the leader
// commits, every create either succeeds (and its cluster exists and comes
// up) or is refused cleanly, and the fleet serves again afterwards.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	dsn := postgres.TestDSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	link := newFaultyLink(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	rs := startReplicasOn(t, t.TempDir(), dsn, []string{viaLink(t, dsn, link), dsn})
	cut, direct := rs.servers[0], rs.servers[1]
	if lead, _ := rs.leader(10 * time.Second); lead != cut {
		t.Fatalf("the server started first, behind the link, should lead; %s does", lead.URL)
	}
	var proj apiv1.Project
	cliJSON(t, direct, adminToken, &proj, "projects", "create", "team-n", "-o", "json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tenant := apiClient(t, direct.URL, proj.Token)
	base, err := tenant.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "base", Region: failoverRegion, GPUType: gpuType,
		NumGPUs: 8, NumPreemptibleGPUs: 8 * 8})
	if err != nil {
		t.Fatal(err)
	}
	waitCluster(t, tenant, base.ClusterID, time.Minute, "8 preemptible nodes ready", func(c *apiv1.Cluster) bool {
		return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 64
	})

	// The database is checked for double assignment throughout.
	var violations []string
	stopCheck, checked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(checked)
		for {
			if n, err := rs.doubleAssigned(); err == nil && n > 0 {
				violations = append(violations, fmt.Sprintf("%s: %d machines with two live nodes", time.Now().Format(time.RFC3339Nano), n))
			}
			select {
			case <-stopCheck:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// Creates go to both servers while the link fails.
	var (
		creates createLog
		cwg     sync.WaitGroup
	)
	stopCreates := make(chan struct{})
	for i, s := range rs.servers {
		cwg.Go(func() {
			c := apiClient(t, s.URL, proj.Token)
			for j := 0; ; j++ {
				select {
				case <-stopCreates:
					return
				default:
				}
				creates.create(c, apiv1.CreateClusterRequest{ClusterName: fmt.Sprintf("n%d-%d", i, j),
					Region: failoverRegion, GPUType: gpuType, NumGPUs: 8}, 20*time.Second)
				time.Sleep(200 * time.Millisecond)
			}
		})
	}

	time.Sleep(time.Second)
	t.Log("fault 1: every connection of the leader dropped")
	link.drop()
	time.Sleep(2 * time.Second)
	t.Log("fault 2: the database unreachable from the leader for longer than its lease")
	link.block()
	newLead, took := rs.leader(10*time.Second, cut)
	if newLead != direct {
		t.Fatalf("the server that reaches the database should lead; %s does", newLead.URL)
	}
	t.Logf("the other server led %s into the outage", took.Round(time.Millisecond))
	time.Sleep(2 * failoverTTL)
	link.unblock()
	time.Sleep(2 * time.Second)
	t.Log("fault 3: every connection of the (now follower) server dropped")
	link.drop()
	time.Sleep(2 * time.Second)
	close(stopCreates)
	cwg.Wait()

	// After the faults: one leader, and both servers answer.
	lead, _ := rs.leader(10 * time.Second)
	for _, s := range rs.servers {
		waitCluster(t, apiClient(t, s.URL, proj.Token), base.ClusterID, 30*time.Second, "base readable through "+s.URL, func(c *apiv1.Cluster) bool {
			return c.Status == "Ready"
		})
	}
	// Every create succeeded, and its cluster comes up, or was refused
	// cleanly.
	list, err := apiClient(t, lead.URL, proj.Token).ListClusters(ctx, client.ListClustersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := creates.check(t, list.Clusters, func(c apiv1.Cluster) {
		waitCluster(t, apiClient(t, lead.URL, proj.Token), c.ClusterID, time.Minute, c.ClusterName+" Ready", func(c *apiv1.Cluster) bool {
			return c.Status == "Ready"
		})
	})
	t.Logf("creates during the faults, by status: %v", counts)
	if counts[201] == 0 {
		t.Error("no create succeeded during the faults: the test shows nothing about availability")
	}
	close(stopCheck)
	<-checked
	if len(violations) > 0 {
		t.Errorf("double assignment seen: %v", violations)
	}
	rs.checkAudit()
}
