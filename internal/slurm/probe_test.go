package slurm_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/slurm"
)

// connCounter accepts connections and records the local address each
// was made to.
type connCounter struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
}

func listen(t *testing.T) *connCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &connCounter{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(conn.LocalAddr().String())
			c.mu.Lock()
			c.seen = append(c.seen, host)
			c.mu.Unlock()
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *connCounter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

func (c *connCounter) addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.seen)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestProbeDialsOnlyOwnNodesOnSlurmdPort: --slurm-probe-every connects
// to the cluster's own nodes only (those with its feature), and only on
// the cluster's SlurmdPort (scontrol show config), never on the port a
// node record reports: what a tenant writes in its slurmctld cannot turn
// the control plane into a port scanner.
func TestProbeDialsOnlyOwnNodesOnSlurmdPort(t *testing.T) {
	slurmd, other := listen(t), listen(t)
	const id = "c-probe"
	node := func(name, addr string, port int, features string) string {
		return fmt.Sprintf(`{"name":%q,"address":%q,"port":%d,"state":"idle","state_flags":[],"features":%q}`, name, addr, port, features)
	}
	nodes := fmt.Sprintf(`{"nodes":[%s,%s,%s,%s]}`,
		node("own-1", "127.0.0.1", slurmd.port(), "sparecap,preemptible,sparecap-"+id),
		node("own-2", "127.0.0.2", other.port(), "sparecap,preemptible,sparecap-"+id),
		node("foreign-1", "127.0.0.3", other.port(), "sparecap,preemptible,sparecap-c-other"),
		node("tenant-1", "127.0.0.4", other.port(), "gpu"))
	s := newStandIn(t, map[string]string{
		"scontrol": fmt.Sprintf("printf 'KillWait = 30 sec\\nSlurmdPort = %d\\n'\n", slurmd.port()),
		"sinfo":    "cat <<'EOF'\n" + nodes + "\nEOF\n",
	})
	c, err := slurm.NewCluster(context.Background(), id, []byte(tenantConf), slurm.Options{Bin: string(s), Dir: t.TempDir(),
		PollEvery: 100 * time.Millisecond, ProbeEvery: 100 * time.Millisecond, Log: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, 10*time.Second, func() error {
		if got := slurmd.addrs(); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
			return fmt.Errorf("probes on SlurmdPort went to %v, want the cluster's two nodes", got)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a few more probes
	if got := slurmd.addrs(); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Errorf("probes on SlurmdPort went to %v", got)
	}
	if got := other.addrs(); len(got) > 0 {
		t.Errorf("probes on a port node records report went to %v", got)
	}
}
