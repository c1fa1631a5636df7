package api

import (
	"cmp"
	"context"
	"slices"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// mergeProject writes a project's merged rows of cm's month, from its
// clusters' rows, once none of them waits to be rolled (a late row
// marked one meanwhile: the pass that rolls it merges).
func mergeProject(ctx context.Context, tx store.Tx, cm domain.ClusterMonth) error {
	st, err := tx.RollupState(ctx)
	if err != nil {
		return err
	}
	for _, d := range st.Dirty {
		if d.Month.Equal(cm.Month) && d.ProjectID == cm.ProjectID && d.ClusterID != "" {
			return nil
		}
	}
	pm := domain.ClusterMonth{Month: cm.Month, ProjectID: cm.ProjectID}
	m := merger{index: map[string]int{}}
	f := store.RollupFilter{ProjectID: cm.ProjectID, From: cm.Month, To: cm.Month.AddDate(0, 1, 0),
		Kinds: []domain.RollupKind{domain.RollupUsage, domain.RollupWork, domain.RollupMore}}
	if err := tx.ScanRollups(ctx, f, m.add); err != nil {
		return err
	}
	return tx.PutRollups(ctx, pm, capGroups(pm, m.rows(pm), domain.MaxRollupGroups))
}

// capGroups keeps at most most groups of work among rows: past that, the
// smallest (by GPU-seconds) are merged as one RollupMore row.
func capGroups(cm domain.ClusterMonth, rows []domain.Rollup, most int) []domain.Rollup {
	var work, rest []domain.Rollup
	for _, r := range rows {
		if r.Kind == domain.RollupWork || r.Kind == domain.RollupMore {
			work = append(work, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(work) <= most {
		return rows
	}
	slices.SortStableFunc(work, func(a, b domain.Rollup) int { return cmp.Compare(b.GPUSeconds, a.GPUSeconds) })
	m := merger{index: map[string]int{}}
	for _, r := range work[most-1:] {
		r.Kind, r.Namespace, r.Account, r.Labels = domain.RollupMore, "", "", nil
		_ = m.add(r) // rows this roller computed: their amounts parse
	}
	return append(append(rest, work[:most-1]...), m.rows(cm)...)
}

// merger merges rows of several clusters by kind and group: usage by
// class, work by namespace, account and label set.
type merger struct {
	index map[string]int
	keys  []mergedRow
}

type mergedRow struct {
	first    domain.Rollup // its kind and group
	line     apiv1.UsageLine
	sum      groupSum
	units    int64
	hasLine  bool
	unpriced int64
}

func (m *merger) add(r domain.Rollup) error {
	k := string(r.Kind) + "\x00" + r.Class
	if r.Kind == domain.RollupMore {
		k = string(r.Kind)
	}
	if r.Kind == domain.RollupWork {
		k = string(r.Kind) + "\x00" + workSetKey(&domain.WorkSpan{Running: domain.Running{Namespace: r.Namespace, Account: r.Account, Labels: r.Labels}})
	}
	line, sum, err := rowLine(r)
	if err != nil {
		return err
	}
	i, ok := m.index[k]
	if !ok {
		i = len(m.keys)
		m.index[k] = i
		m.keys = append(m.keys, mergedRow{first: r})
	}
	g := &m.keys[i]
	g.units = max(g.units, r.Units)
	g.unpriced += r.UnpricedGPUSeconds
	if !r.HasLine {
		return nil
	}
	if !g.hasLine {
		g.line, g.sum, g.hasLine = line, sum, true
		return nil
	}
	g.sum = groupSum{g.sum.amount.Add(sum.amount), g.sum.onDemand.Add(sum.onDemand)}
	mergeLine(&g.line, line)
	return nil
}

// rows are the merged rows, in the order their groups came.
func (m *merger) rows(cm domain.ClusterMonth) []domain.Rollup {
	out := make([]domain.Rollup, 0, len(m.keys))
	for _, g := range m.keys {
		r := domain.Rollup{Month: cm.Month, ProjectID: cm.ProjectID, Kind: g.first.Kind, Start: cm.Month, End: cm.Month}
		if g.hasLine {
			r = rollupOf(cm, cm.ProjectID, g.first.Kind, g.line, g.sum)
		}
		r.Namespace, r.Account, r.Labels = g.first.Namespace, g.first.Account, g.first.Labels
		r.Units, r.UnpricedGPUSeconds = g.units, g.unpriced
		out = append(out, r)
	}
	return slices.Clip(out)
}
