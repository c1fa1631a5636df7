package api

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// lostWorkGroups are the group_by values of GET /v1/stats/lost-work and
// each one's key of an entry.
var lostWorkGroups = map[string]func(w *domain.LostWork) string{
	"reclaim": func(w *domain.LostWork) string { return w.NodeID },
	"job": func(w *domain.LostWork) string {
		if w.Job != "" {
			return w.Job
		}
		return "node/" + w.NodeName
	},
	"cluster": func(w *domain.LostWork) string { return w.ClusterID },
	"month":   func(w *domain.LostWork) string { return w.At.UTC().Format("2006-01") },
}

// lostWork serves GET /v1/stats/lost-work: the ledger of the work drains
// put at risk at their notices over [from, to), of the caller's project
// (the admin's: any, or all), grouped, valued at the price the work was
// paid at, next to what preemptible capacity saved in the same period.
func (s *Server) lostWork(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	from, to, err := period(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	group := cmp.Or(q.Get("group_by"), "reclaim")
	key, ok := lostWorkGroups[group]
	if !ok {
		s.fail(w, r, invalid("group_by", "group_by must be reclaim, job, cluster or month; got %q", boundQuery(group)))
		return
	}
	f, b, err := s.usageInput(ctx, q, p, from, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, err := s.store.ListLostWork(ctx, store.LostWorkFilter{ProjectID: f.ProjectID, ClusterID: f.ClusterID, From: from, To: to})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pr, err := s.scanPriced(ctx, f, b, from, to, func(*domain.UsageRecord) string { return "" })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ledgerView(entries, group, key, b)
	out.From, out.To = from, to
	savings := billing.Totals{}
	if t := pr.byClass[string(domain.Preemptible)]; t != nil {
		savings = *t
	}
	out.Totals.PreemptibleSavings = savings.Savings().Round(2)
	writeJSON(w, http.StatusOK, out)
}

// ledgerView groups entries by key, valuing each at the price its work
// was paid at when it was noticed.
func ledgerView(entries []domain.LostWork, group string, key func(*domain.LostWork) string, b *billing.Book) apiv1.LostWork {
	out := apiv1.LostWork{GroupBy: group, Lines: []apiv1.LostWorkLine{}}
	at := map[string]int{}
	sums := []billing.Money{}
	var total billing.Money
	for i := range entries {
		e := &entries[i]
		k := key(e)
		j, ok := at[k]
		if !ok {
			j = len(out.Lines)
			at[k] = j
			l := apiv1.LostWorkLine{Key: k}
			switch group {
			case "reclaim":
				noticed := e.At.UTC()
				l.ClusterID, l.ClusterName, l.NodeName, l.Job, l.Cause, l.NoticedAt = e.ClusterID, e.ClusterName, e.NodeName, e.Job, string(e.Cause), &noticed
			case "job":
				l.ClusterID, l.ClusterName, l.Job = e.ClusterID, e.ClusterName, e.Job
			case "cluster":
				l.ClusterID, l.ClusterName = e.ClusterID, e.ClusterName
			}
			out.Lines = append(out.Lines, l)
			sums = append(sums, billing.Money{})
		}
		l := &out.Lines[j]
		l.Drains++
		l.LostGPUSeconds += e.GPUSeconds
		if v, ok := b.WorkValue(e.Region, e.GPUType, e.Class, e.At, e.GPUSeconds); ok {
			sums[j] = sums[j].Add(v)
			total = total.Add(v)
		}
		out.Totals.Drains++
		out.Totals.LostGPUSeconds += e.GPUSeconds
		if !e.SavedAt.IsZero() {
			l.SavedGPUSeconds += e.GPUSeconds
			out.Totals.SavedGPUSeconds += e.GPUSeconds
		}
	}
	for j := range out.Lines {
		l := &out.Lines[j]
		l.LostGPUHours = float64(l.LostGPUSeconds) / 3600
		l.DestroyedGPUHours = float64(l.LostGPUSeconds-l.SavedGPUSeconds) / 3600
		l.LostAmount = sums[j].Round(6)
	}
	if group != "reclaim" {
		slices.SortStableFunc(out.Lines, func(a, b apiv1.LostWorkLine) int { return cmp.Compare(a.Key, b.Key) })
	}
	out.Totals.LostGPUHours = float64(out.Totals.LostGPUSeconds) / 3600
	out.Totals.DestroyedGPUHours = float64(out.Totals.LostGPUSeconds-out.Totals.SavedGPUSeconds) / 3600
	out.Totals.LostAmount = total.Round(2)
	return out
}
