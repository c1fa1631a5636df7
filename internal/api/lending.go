package api

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// poolSums add up one pool's period.
type poolSums struct {
	lentIdle, lentReserved, standard int64 // GPU-seconds
	preRevenue, stdRevenue           billing.Money
	reclaims                         int
	lost                             int64
	lostValue                        billing.Money
}

func (p *poolSums) add(o *poolSums) {
	p.lentIdle, p.lentReserved, p.standard = p.lentIdle+o.lentIdle, p.lentReserved+o.lentReserved, p.standard+o.standard
	p.preRevenue, p.stdRevenue = p.preRevenue.Add(o.preRevenue), p.stdRevenue.Add(o.stdRevenue)
	p.reclaims, p.lost, p.lostValue = p.reclaims+o.reclaims, p.lost+o.lost, p.lostValue.Add(o.lostValue)
}

func (p *poolSums) view(region, gpu string) apiv1.LendingPool {
	h := func(gs int64) float64 { return float64(gs*100/3600) / 100 }
	return apiv1.LendingPool{Region: region, GPUType: gpu, LentIdleGPUHours: h(p.lentIdle), LentReservedGPUHours: h(p.lentReserved),
		StandardGPUHours: h(p.standard), PreemptibleRevenue: p.preRevenue.Round(2), StandardRevenue: p.stdRevenue.Round(2),
		Revenue: p.preRevenue.Add(p.stdRevenue).Round(2), Reclaims: p.reclaims, LostGPUHours: h(p.lost), LostValue: p.lostValue.Round(2)}
}

// reclaimCauses are the drains that take capacity back from a tenant
// (the preemption statistics' Preemptions).
var reclaimCauses = []domain.DrainCause{domain.CausePreempted, domain.CauseFairShare, domain.CauseOutOfService}

// lending serves GET /v1/admin/lending: per pool, over [from, to), the
// GPU-hours lent out of idle and out of reserved capacity, revenue, the
// reclaims and the work they put at risk.
func (s *Server) lending(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	from, to, err := period(q)
	if err == nil {
		err = s.checkRaw(ctx, from, false) // lending reads raw records only
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, b, err := s.usageInput(ctx, q, p, from, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pools := lendingPools{}
	if err := s.addLent(ctx, f, b, from, to, pools); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.addLost(ctx, f.ProjectID, b, from, to, pools); err != nil {
		s.fail(w, r, err)
		return
	}
	// Reclaims as the preemption statistics count them (every drain of a
	// preemptible node for a cause its tenant did not ask for), idle nodes
	// too: the ledger has an entry only where work ran.
	stats, err := s.statsOf(r, "", "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, st := range stats.Stats {
		if st.Preemptions > 0 {
			pools.of(st.Region, st.GPUType).reclaims += st.Preemptions
		}
	}
	out := apiv1.Lending{Currency: Currency, From: from, To: to, Pools: []apiv1.LendingPool{}}
	var total poolSums
	for k, ps := range pools {
		out.Pools = append(out.Pools, ps.view(k.region, k.gpu))
		total.add(ps)
	}
	slices.SortFunc(out.Pools, func(a, b apiv1.LendingPool) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.GPUType, b.GPUType))
	})
	out.Totals = total.view("", "")
	writeJSON(w, http.StatusOK, out)
}

// poolKey names a pool: a region and a GPU type.
type poolKey struct{ region, gpu string }

// lendingPools are the sums of each pool.
type lendingPools map[poolKey]*poolSums

func (p lendingPools) of(region, gpu string) *poolSums {
	k := poolKey{region, gpu}
	if p[k] == nil {
		p[k] = &poolSums{}
	}
	return p[k]
}

// addLent adds the GPU-seconds and revenue of f's usage over [from, to)
// to pools, standard apart from what was lent out of idle and out of
// reserved capacity.
func (s *Server) addLent(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time, pools lendingPools) error {
	var one [1]domain.UsageRecord
	return s.store.ScanUsage(ctx, f, func(u domain.UsageRecord) error {
		one[0] = u
		b.Price(one[:], from, to, func(l billing.Line) {
			ps, gs := pools.of(u.Region, u.GPUType), l.Seconds*int64(u.GPUs)
			switch {
			case u.Class == domain.Standard:
				ps.standard, ps.stdRevenue = ps.standard+gs, ps.stdRevenue.Add(l.Amount)
			case u.ReservationID != "":
				ps.lentReserved, ps.preRevenue = ps.lentReserved+gs, ps.preRevenue.Add(l.Amount)
			default:
				ps.lentIdle, ps.preRevenue = ps.lentIdle+gs, ps.preRevenue.Add(l.Amount)
			}
		})
		return nil
	})
}

// addLost adds the work that reclaims took from project (every project's
// for "") over [from, to), and its value, to pools.
func (s *Server) addLost(ctx context.Context, project string, b *billing.Book, from, to time.Time, pools lendingPools) error {
	entries, err := s.store.ListLostWork(ctx, store.LostWorkFilter{ProjectID: project, From: from, To: to})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.Contains(reclaimCauses, e.Cause) {
			continue
		}
		ps := pools.of(e.Region, e.GPUType)
		ps.lost += e.GPUSeconds
		if v, ok := b.WorkValue(e.Region, e.GPUType, e.Class, e.At, e.GPUSeconds); ok {
			ps.lostValue = ps.lostValue.Add(v)
		}
	}
	return nil
}
