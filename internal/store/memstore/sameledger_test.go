package memstore_test

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

func (g *gen) lostWork() domain.LostWork {
	return domain.LostWork{NodeID: g.id("n", 8), NodeName: g.text(), ClusterID: g.id("c", 3), ClusterName: g.text(),
		ProjectID: g.id("p", 2), Class: domain.Preemptible, Cause: domain.CausePreempted, At: g.when(), GPUSeconds: int64(g.pick(100)),
		Job: g.text(), SavedAt: g.when()}
}

func (g *gen) span() domain.WorkSpan {
	w := domain.WorkSpan{ProjectID: g.id("p", 2), ClusterID: g.id("c", 3), NodeID: g.id("n", 4), Running: domain.Running{
		Key: g.id("k", 3), Namespace: g.text(), Name: g.text(), Job: g.text(), Account: g.text(), GPUs: g.pick(8),
		Start: g.when(), Progress: int64(g.pick(5))}, End: g.when()}
	switch g.pick(4) {
	case 0:
		w.Labels = map[string]string{"team": g.text(), g.text(): "x", "a": `x","team":"fake`}
	case 1:
		w.Labels = map[string]string{}
	}
	return w
}

func (g *gen) budget() domain.Budget {
	b := domain.Budget{ID: g.id("b", 4), ProjectID: g.id("p", 4), Name: g.id("name", 3), Label: g.text(), Amount: "10",
		ChangePercent: g.pick(50), CreatedAt: g.when()}
	switch g.pick(3) {
	case 0:
		b.Thresholds = []int{50, 100}
	case 1:
		b.Thresholds = []int{}
	}
	return b
}

func (g *gen) alert() domain.BudgetAlert {
	return domain.BudgetAlert{BudgetID: g.id("b", 4), ProjectID: g.id("p", 2), Name: g.text(), Kind: domain.AlertSpend,
		Threshold: 50, Key: g.id("key", 3), Month: g.id("2026-1", 2), At: g.when(), Spend: "1", Message: g.text()}
}

func (g *gen) ledgerOps() []func() op {
	return []func() op{
		func() op {
			return each("AddLostWork", 1+g.pick(3), g.lostWork,
				func(tx store.Tx) func(context.Context, []domain.LostWork) error { return tx.AddLostWork })
		},
		func() op {
			id, at := g.id("n", 8), g.when()
			return op{"SaveLostWork", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.SaveLostWork(ctx, id, at)) }}
		},
		func() op {
			return each("AddWorkSpans", 1+g.pick(4), g.span,
				func(tx store.Tx) func(context.Context, []domain.WorkSpan) error { return tx.AddWorkSpans })
		},
		func() op {
			return each("EndWorkSpans", 1+g.pick(2), g.span,
				func(tx store.Tx) func(context.Context, []domain.WorkSpan) error { return tx.EndWorkSpans })
		},
		func() op {
			return each("SetWorkProgress", 1+g.pick(2), g.span,
				func(tx store.Tx) func(context.Context, []domain.WorkSpan) error { return tx.SetWorkProgress })
		},
		func() op {
			return one("CreateBudget", g.budget, func(tx store.Tx) func(context.Context, domain.Budget) error { return tx.CreateBudget })
		},
		func() op {
			id := g.id("b", 4)
			return op{"DeleteBudget", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.DeleteBudget(ctx, id)) }}
		},
		func() op {
			return each("AddBudgetAlerts", 1+g.pick(3), g.alert,
				func(tx store.Tx) func(context.Context, []domain.BudgetAlert) error { return tx.AddBudgetAlerts })
		},
		func() op {
			p := domain.Price{ID: g.id("pr", 4), Kind: domain.PriceOnDemand, Value: "1", EffectiveFrom: g.when(), CreatedAt: g.when()}
			return op{"CreatePrice", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.CreatePrice(ctx, p)) }}
		},
		func() op {
			tok := domain.Token{ID: g.id("t", 4), Hash: g.id("h", 4), ProjectID: g.id("p", 4), Name: g.text(), CreatedAt: g.when(),
				ExpiresAt: g.when(), RevokedAt: g.when(), LastUsedAt: g.when()}
			if g.bit() {
				tok.ProjectID = ""
			}
			return op{"CreateToken", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.CreateToken(ctx, tok)) }}
		},
		func() op {
			tok := domain.Token{ID: g.id("t", 4), Name: g.text(), ExpiresAt: g.when(), RevokedAt: g.when()}
			return op{"UpdateToken", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.UpdateToken(ctx, tok)) }}
		},
		func() op {
			id := g.id("t", 5)
			return op{"DeleteToken", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.DeleteToken(ctx, id)) }}
		},
	}
}

// reads are the reads compared after each transaction.
func (g *gen) reads() []read {
	lw := store.LostWorkFilter{ProjectID: g.id("p", 3), ClusterID: g.id("c", 4), From: g.when(), To: g.when()}
	if g.bit() {
		lw = store.LostWorkFilter{From: g.when()}
	}
	ws := store.WorkSpanFilter{From: g.when(), To: g.when(), Open: g.bit()}
	switch g.pick(3) {
	case 0:
		ws.ProjectID = g.id("p", 2)
	case 1:
		ws.ClusterID = g.id("c", 3)
	}
	ws.Only = []string{"", "", "job", "label:team", "name"}[g.pick(5)]
	ba := store.BudgetAlertFilter{ProjectID: g.id("p", 3), Month: g.id("2026-1", 2), Limit: g.pick(3)}
	if g.bit() {
		ba = store.BudgetAlertFilter{BudgetID: g.id("b", 4)}
	}
	out := []read{
		{"Snapshot", func(ctx context.Context, s store.Store) any {
			snap, err := s.Snapshot(ctx)
			return res([]any{snap.Machines, snap.Reservations, snap.Clusters, store.Values(snap.Nodes)}, err)
		}},
		{fmt.Sprintf("ListLostWork(%+v)", lw), func(ctx context.Context, s store.Store) any { return res(s.ListLostWork(ctx, lw)) }},
		{fmt.Sprintf("ScanWorkSpans(%+v)", ws), func(ctx context.Context, s store.Store) any {
			var got []domain.WorkSpan
			err := s.ScanWorkSpans(ctx, ws, func(w domain.WorkSpan) error { got = append(got, w); return nil })
			return res(got, err)
		}},
		{"ListBudgets", func(ctx context.Context, s store.Store) any {
			a, err := s.ListBudgets(ctx, "")
			b, err2 := s.ListBudgets(ctx, "p1")
			return []any{res(a, err), res(b, err2)}
		}},
		{fmt.Sprintf("ListBudgetAlerts(%+v)", ba), func(ctx context.Context, s store.Store) any { return res(s.ListBudgetAlerts(ctx, ba)) }},
		{"ListPrices", func(ctx context.Context, s store.Store) any { return res(s.ListPrices(ctx)) }},
	}
	return append(append(out, g.fleetReads()...), g.webhookReads()...)
}

// fleetReads are the reads of projects, tokens, clusters, nodes, events
// and usage.
func (g *gen) fleetReads() []read {
	nf, ef := g.nodeFilter(), store.EventFilter{ClusterID: g.id("c", 4), AfterSeq: int64(g.pick(20)), Limit: g.pick(4)}
	if g.bit() {
		ef.ClusterID = ""
	}
	uf := store.UsageFilter{From: g.when(), To: g.when(), Open: g.bit()}
	switch g.pick(3) {
	case 0:
		uf.ProjectID = g.id("p", 3)
	case 1:
		uf.ClusterID = g.id("c", 4)
	}
	id, cid, tid, hash, pid, mid := g.moving("n", 11, 6), g.id("c", 5), g.id("t", 5), g.id("h", 5), g.id("p", 4), g.id("m", 21)
	return []read{
		{fmt.Sprintf("ListNodes(%+v)", nf), func(ctx context.Context, s store.Store) any { return res(s.ListNodes(ctx, nf)) }},
		{fmt.Sprintf("ListEvents(%+v)", ef), func(ctx context.Context, s store.Store) any { return res(s.ListEvents(ctx, ef)) }},
		{fmt.Sprintf("ListUsage(%+v)", uf), func(ctx context.Context, s store.Store) any { return res(s.ListUsage(ctx, uf)) }},
		{"gets", func(ctx context.Context, s store.Store) any {
			k, kerr := s.GetKubeconfig(ctx, cid)
			return []any{res(s.GetNode(ctx, id)), res(s.GetCluster(ctx, cid)), res(s.GetClusterRecord(ctx, cid)), res(k, kerr),
				res(s.GetToken(ctx, tid)), res(s.TokenByHash(ctx, hash)), res(s.GetProject(ctx, pid)),
				res(s.GetMachine(ctx, mid))}
		}},
		{"lists", func(ctx context.Context, s store.Store) any {
			return []any{res(s.ListProjects(ctx)), res(s.ListTokens(ctx, "")), res(s.ListTokens(ctx, "p1")),
				res(s.ListClusters(ctx, "")), res(s.ListClusters(ctx, "p1")), res(s.ListMachines(ctx)), res(s.ListReservations(ctx))}
		}},
	}
}

// fixedReads are reads of everything of the fleet, drawing nothing.
func (g *gen) fixedReads() []read {
	return []read{
		{"Snapshot", func(ctx context.Context, s store.Store) any {
			snap, err := s.Snapshot(ctx)
			return res([]any{snap.Machines, snap.Reservations, snap.Clusters, store.Values(snap.Nodes)}, err)
		}},
		{"clusters", func(ctx context.Context, s store.Store) any {
			var out []any
			for i := range 4 {
				id := fmt.Sprint("c", i)
				k, err := s.GetKubeconfig(ctx, id)
				out = append(out, res(s.GetClusterRecord(ctx, id)), res(k, err))
			}
			return out
		}},
	}
}
