package api

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestLending: the operator's view of a period in which a tenant's
// preemptible nodes ran on acme's reserved machines until acme took them
// back: GPU-hours lent out of reserved capacity, standard hours, revenue
// that adds up, and the reclaims.
func TestLending(t *testing.T) {
	e := newEnv(t)
	start := e.clk.Now()
	e.reclaim()
	e.settle()
	e.clk.Step(time.Hour)
	end := e.clk.Now()
	var l apiv1.Lending
	e.do("admin", "GET", "/v1/admin/lending"+q(start, end), "", 200, &l)
	if len(l.Pools) != 1 {
		t.Fatalf("pools %+v", l.Pools)
	}
	p := l.Pools[0]
	if p.Region != "us-central-2" || p.GPUType != "RTX_6000_PCI" || p.StandardGPUHours <= 0 ||
		p.LentIdleGPUHours+p.LentReservedGPUHours <= 0 || p.Reclaims != 2 || l.Totals.Reclaims != 2 {
		t.Fatalf("pool %+v", p)
	}
	var u apiv1.Usage
	e.do("admin", "GET", "/v1/usage"+q(start, end, "group_by", "compute_class"), "", 200, &u)
	if p.Revenue != u.Totals.Amount || p.PreemptibleRevenue != u.ByClass["preemptible"].Amount {
		t.Fatalf("revenue %s (preemptible %s), usage says %s (%s)", p.Revenue, p.PreemptibleRevenue, u.Totals.Amount, u.ByClass["preemptible"].Amount)
	}
	e.apiErr("p", "GET", "/v1/admin/lending"+q(start, end), "", 403)
	e.apiErr("admin", "GET", "/v1/admin/lending", "", 400)
}
