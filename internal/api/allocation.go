package api

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/costsplit"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// workGroups are the group_by values that split each node's usage among
// the work that ran on it (cost allocation), by what they group.
var workGroups = map[string]func(w *domain.WorkSpan) string{
	// A namespace is a cluster's: the same name in two clusters is two.
	"namespace": func(w *domain.WorkSpan) string { return w.Namespace },
	// A job (a gang, a Job, a Slurm job ID) is one across its reclaims
	// and reruns, within its cluster.
	"job":     func(w *domain.WorkSpan) string { return w.Job },
	"account": func(w *domain.WorkSpan) string { return w.Account },
	// One unit of work: a pod, a run of a Slurm job.
	"work": func(w *domain.WorkSpan) string { return strings.TrimPrefix(w.Namespace+"/"+w.Name, "/") },
}

// labelKey is a Kubernetes label key: an optional DNS-subdomain prefix
// and a name of at most 63 characters.
var labelKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// workGroup is the key of a work group_by, ok false when g is none.
// Namespaces and jobs are each cluster's own, so their lines are kept
// apart by cluster.
func workGroup(g string) (key func(w *domain.WorkSpan) string, perCluster, ok bool, err error) {
	if k, found := strings.CutPrefix(g, "label:"); found {
		if !labelKey.MatchString(k) {
			return nil, false, true, invalid("group_by", "group_by label:<key> needs a label key like team or example.com/team; got %q", boundQuery(k))
		}
		return func(w *domain.WorkSpan) string { return w.Labels[k] }, false, true, nil
	}
	key, ok = workGroups[g]
	return key, g == "namespace" || g == "job" || g == "work", ok, nil
}

// splitter prices usage records like pricer and splits each line among
// the work spans of its node (costsplit), grouping the parts by key, the
// rest as one idle line per cluster.
type splitter struct {
	b          *billing.Book
	from, to   time.Time
	key        func(*domain.WorkSpan) string
	perCluster bool
	nodes      map[string]*costsplit.Work[string] // the groups of each node's work
	total      billing.Totals
	byClass    map[string]*billing.Totals
	groups     map[string]int
	keys       []string         // each line's group key
	units      map[string]int64 // the most progress of each group's work
	lines      []apiv1.UsageLine
	sums       []groupSum
	one        [1]domain.UsageRecord
	scratch    costsplit.Scratch
}

func newSplitter(b *billing.Book, from, to time.Time, key func(*domain.WorkSpan) string, perCluster bool) *splitter {
	return &splitter{b: b, from: from, to: to, key: key, perCluster: perCluster, nodes: map[string]*costsplit.Work[string]{},
		byClass: map[string]*billing.Totals{}, groups: map[string]int{}, units: map[string]int64{}}
}

// groupKey is the key of group's line: of its cluster too when groups are
// each cluster's, and for the idle line.
func (s *splitter) groupKey(cluster, group string, idle bool) string {
	k := group
	if idle {
		k = "\x00idle"
	}
	if s.perCluster || idle {
		k = cluster + "\x00" + k
	}
	return k
}

// span adds a work span, in any order.
func (s *splitter) span(w domain.WorkSpan) error {
	n := s.nodes[w.NodeID]
	if n == nil {
		n = &costsplit.Work[string]{}
		s.nodes[w.NodeID] = n
	}
	g := s.key(&w)
	n.Add(costsplit.ClaimOf(&w), w.Key, g)
	if w.Progress > 0 {
		k := s.groupKey(w.ClusterID, g, false)
		s.units[k] = max(s.units[k], w.Progress)
	}
	return nil
}

// add prices a usage record.
func (s *splitter) add(r domain.UsageRecord) error {
	s.one[0] = r
	s.b.Price(s.one[:], s.from, s.to, s.line)
	return nil
}

func (s *splitter) line(l billing.Line) {
	s.total.Add(l)
	class := string(l.Record.Class)
	if s.byClass[class] == nil {
		s.byClass[class] = &billing.Totals{}
	}
	s.byClass[class].Add(l)
	view := lineView(s.b, l)
	idle := l.Seconds * int64(l.Record.GPUs)
	if n := s.nodes[l.Record.NodeID]; n != nil {
		claims, groups := n.Ordered()
		var parts []int64
		parts, idle = s.scratch.GPUSeconds(l.Record.GPUs, l.Start.Unix(), l.End.Unix(), claims)
		for i, gs := range parts {
			if gs > 0 {
				s.part(l, &view, groups[i], false, gs)
			}
		}
	}
	if idle > 0 {
		s.part(l, &view, "", true, idle)
	}
}

// part adds gpuSeconds of l (whose usage line is view) to its group.
func (s *splitter) part(l billing.Line, view *apiv1.UsageLine, group string, idle bool, gpuSeconds int64) {
	amt, od := l.Part(gpuSeconds)
	line := *view
	line.Group, line.Idle, line.GPUSeconds, line.BilledSeconds = group, idle, gpuSeconds, 0
	s.merge(s.groupKey(l.Record.ClusterID, group, idle), line, groupSum{amt, od})
}

// merge adds line, whose exact sums are sum, to the group k.
func (s *splitter) merge(k string, line apiv1.UsageLine, sum groupSum) {
	i, ok := s.groups[k]
	if !ok {
		s.groups[k] = len(s.lines)
		s.lines = append(s.lines, line)
		s.keys = append(s.keys, k)
		s.sums = append(s.sums, sum)
		return
	}
	s.sums[i].amount, s.sums[i].onDemand = s.sums[i].amount.Add(sum.amount), s.sums[i].onDemand.Add(sum.onDemand)
	mergeLine(&s.lines[i], line)
}

// result is the groups, by group then cluster, idle lines last.
func (s *splitter) result() priced {
	out := priced{lines: s.lines, total: s.total, byClass: s.byClass}
	for i := range s.sums {
		out.lines[i].Amount, out.lines[i].OnDemandAmount = s.sums[i].amount.Round(6), s.sums[i].onDemand.Round(6)
		if u := s.units[s.keys[i]]; u > 0 {
			out.lines[i].Units, out.lines[i].CostPerUnit = u, s.sums[i].amount.PerUnit(u, 6)
		}
	}
	slices.SortStableFunc(out.lines, func(a, b apiv1.UsageLine) int {
		if a.Idle != b.Idle {
			if a.Idle {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Group+"\x00"+a.ClusterName+"\x00"+a.ClusterID, b.Group+"\x00"+b.ClusterName+"\x00"+b.ClusterID)
	})
	return out
}

// splitUsage prices f's usage over [from, to) split among its work; only
// is the one field of the spans the split reads (store.WorkSpanFilter).
// Whole rolled months come from their rollups.
func (s *Server) splitUsage(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time,
	key func(*domain.WorkSpan) string, perCluster bool, only string) (priced, error) {
	sp := newSplitter(b, from, to, key, perCluster)
	if err := s.splitParts(ctx, sp, f, from, to, only); err != nil {
		return priced{}, err
	}
	return sp.result(), nil
}
