// Package retention keeps tables that grow with time bounded: each Rule
// deletes its table's rows older than its retention, a slice of at most
// Slice rows a transaction, so a prune never holds the store's writers
// (the controller's commits, a request) for long. A pass takes at most
// Slices slices of each rule; a backlog (a first pass on a years-old
// database) is left for the next pass, a minute later rather than an
// hour. The server runs it on the leader. docs/operations.md lists every
// table's retention.
package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/store"
)

// Rule is one table's retention.
type Rule struct {
	// Table names it (in metrics and logs).
	Table string
	// Keep is how long its rows are kept (0 or less: for ever).
	Keep time.Duration
	// Prune deletes up to limit of its rows older than before, the oldest
	// first, returning how many went.
	Prune func(ctx context.Context, tx store.Tx, before time.Time, limit int) (int, error)
}

// Defaults of a Pruner.
const (
	DefaultSlice  = 1000
	DefaultSlices = 100
	DefaultEvery  = time.Hour
)

// Pruner applies Rules.
type Pruner struct {
	Store store.Store
	Clock clock.Clock
	Rules []Rule
	// Slice is the most rows a transaction deletes, Slices the most
	// transactions a rule takes a pass (0: the defaults).
	Slice, Slices int
	// Pruned, if set, is told each table's rows deleted by a pass.
	Pruned func(table string, n int)
	// Sizes, if set, is told every table's rows and bytes after each
	// pass, read from Sizer (a store that says; see store.Sizer).
	Sizer store.Sizer
	Sizes func([]store.TableSize)
}

// Pass prunes each rule once, at most Slices slices of Slice rows. backlog
// is true when a rule's last slice was full: rows may be left to prune.
func (p *Pruner) Pass(ctx context.Context) (backlog bool, err error) {
	slice, slices := p.Slice, p.Slices
	if slice <= 0 {
		slice = DefaultSlice
	}
	if slices <= 0 {
		slices = DefaultSlices
	}
	now := p.Clock.Now()
	for _, r := range p.Rules {
		if r.Keep <= 0 {
			continue
		}
		total, full, err := p.prune(ctx, r, now.Add(-r.Keep), slice, slices)
		if total > 0 && p.Pruned != nil {
			p.Pruned(r.Table, total)
		}
		if err != nil {
			return backlog, fmt.Errorf("retention of %s: %w", r.Table, err)
		}
		backlog = backlog || full
	}
	if p.Sizer != nil && p.Sizes != nil {
		sizes, err := p.Sizer.TableSizes(ctx)
		if err != nil {
			return backlog, fmt.Errorf("table sizes: %w", err)
		}
		p.Sizes(sizes)
	}
	return backlog, nil
}

// prune runs rule r's slices; full is true when the last was full.
func (p *Pruner) prune(ctx context.Context, r Rule, before time.Time, slice, slices int) (total int, full bool, err error) {
	for range slices {
		var n int
		err = p.Store.Update(ctx, func(tx store.Tx) (err error) {
			n, err = r.Prune(ctx, tx, before, slice)
			return err
		})
		if err != nil {
			return total, false, err
		}
		total += n
		if n < slice {
			return total, false, nil
		}
	}
	return total, true, nil
}

// Run makes a pass every `every` (a minute after a pass that left a
// backlog, or failed) until ctx ends; failures go to logf.
func (p *Pruner) Run(ctx context.Context, every time.Duration, logf func(msg string, args ...any)) {
	for {
		wait := every
		if backlog, err := p.Pass(ctx); err != nil || backlog {
			if err != nil && ctx.Err() == nil {
				logf("retention pass failed; trying again in a minute", "err", err)
			}
			wait = min(every, time.Minute)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(wait):
		}
	}
}

// BudgetAlerts is the rule of the budget alerts' history, kept keep.
func BudgetAlerts(keep time.Duration) Rule {
	return txRule("budget_alerts", keep, store.Tx.PruneBudgetAlerts)
}

// Usage is the rule of raw usage records, kept keep once their months
// are rolled up (the store prunes none a rollup does not cover).
func Usage(keep time.Duration) Rule {
	return rawRule("usage", keep, store.Tx.PruneUsage)
}

// WorkSpans is the rule of raw work spans, kept keep once their months
// are rolled up.
func WorkSpans(keep time.Duration) Rule {
	return rawRule("work_spans", keep, store.Tx.PruneWorkSpans)
}

// rawRule is the rule of a table of raw rows the rollups cover: none of
// a month waiting to be rolled again goes (clean).
func rawRule(table string, keep time.Duration, prune func(store.Tx, context.Context, time.Time, int) (int, error)) Rule {
	return Rule{Table: table, Keep: keep, Prune: func(ctx context.Context, tx store.Tx, before time.Time, limit int) (int, error) {
		before, err := clean(ctx, tx, before)
		if err != nil {
			return 0, err
		}
		return prune(tx, ctx, before, limit)
	}}
}

// ClusterWork is the rule of the clusters' work rollups (a cluster's
// month by namespace, account and label set), kept keep: then only the
// projects' merged rows and the clusters' usage and idle rows answer for
// those months.
func ClusterWork(keep time.Duration) Rule {
	return Rule{Table: "rollups", Keep: keep, Prune: func(ctx context.Context, tx store.Tx, before time.Time, limit int) (int, error) {
		return tx.PruneClusterWork(ctx, store.MonthOf(before), limit)
	}}
}

// LostWork is the rule of the lost-work ledger, kept keep.
func LostWork(keep time.Duration) Rule {
	return txRule("lost_work", keep, store.Tx.PruneLostWork)
}

// NodeHistory is the rule of the removed nodes' history, kept keep.
func NodeHistory(keep time.Duration) Rule {
	return txRule("node_history", keep, store.Tx.PruneNodeHistory)
}

// txRule is the rule of a table its transaction's prune keeps.
func txRule(table string, keep time.Duration, prune func(store.Tx, context.Context, time.Time, int) (int, error)) Rule {
	return Rule{Table: table, Keep: keep, Prune: func(ctx context.Context, tx store.Tx, before time.Time, limit int) (int, error) {
		return prune(tx, ctx, before, limit)
	}}
}

// LabelSets is the rule of the rollups' label sets: one no row names any
// more goes (its rows went with their retention).
func LabelSets() Rule {
	return Rule{Table: "label_sets", Keep: 1, Prune: func(ctx context.Context, tx store.Tx, _ time.Time, limit int) (int, error) {
		return tx.PruneLabelSets(ctx, limit)
	}}
}

// clean is before, or earlier: the start of the first month waiting to
// be rolled again (a late row), whose raw rows the roller still reads.
func clean(ctx context.Context, tx store.Tx, before time.Time) (time.Time, error) {
	st, err := tx.RollupState(ctx)
	if err != nil {
		return before, err
	}
	if len(st.Dirty) > 0 && st.Dirty[0].Month.Before(before) {
		before = st.Dirty[0].Month
	}
	return before, nil
}
