// Package quota keeps what each project's own input makes the server keep
// (domain.StorageTables: its work spans, budgets and alerts, webhook
// endpoints and deliveries, tokens) within the project's storage quota.
//
// The Keeper counts every project's storage with one scan of those
// tables (the leader, at the start of its term and every Every), and
// adds what is written between counts as the writers tell it, so a
// project's use is known without a scan per write. A project at its
// quota first sheds the detail its rollups keep (its raw work spans of
// rolled months), then has its optional writes refused: new budgets and
// webhook endpoints (an error), new work spans (not recorded: its work
// counts as idle in cost allocation). Lifecycle events, notices, their
// webhook deliveries, usage and anything billing reads are never counted
// and never refused.
package quota

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Every is how often the leader counts again.
const Every = 10 * time.Minute

// shedSlice is how many spans a transaction sheds.
const shedSlice = 1000

// Keeper knows each project's storage and quota.
type Keeper struct {
	Store store.Store
	// Default is the quota of a project without its own (bytes).
	Default int64
	// Reached, if set, is told when a project is found over its quota by
	// a count, once until it is under again.
	Reached func(ctx context.Context, project string, used, quota int64)
	// Measured, if set, is given every project's storage after each
	// count.
	Measured func([]Use)

	mu      sync.Mutex
	counted time.Time
	tables  map[string][]domain.StorageUse
	used    map[string]int64 // at the last count, plus what was added since
	quotas  map[string]int64 // each project's own (0: Default)
	over    map[string]bool  // told: over its quota, or refused a write
	refused map[string]bool  // refused a write since the last count
}

// Use is a project's storage as the Keeper knows it.
type Use struct {
	ProjectID   string
	Used, Quota int64
	Tables      []domain.StorageUse
}

// Count counts every project's storage again; a project over its quota
// sheds its spans of rolled months first (and is counted again).
func (k *Keeper) Count(ctx context.Context, now time.Time) error {
	if err := k.count(ctx, now); err != nil {
		return err
	}
	shed := false
	for _, u := range k.Uses() {
		if u.Used <= u.Quota {
			continue
		}
		for {
			var n int
			err := k.Store.Update(ctx, func(tx store.Tx) (err error) {
				n, err = tx.PruneProjectSpans(ctx, u.ProjectID, shedSlice)
				return err
			})
			if err != nil {
				return err
			}
			shed = shed || n > 0
			if n < shedSlice {
				break
			}
		}
	}
	if shed {
		if err := k.count(ctx, now); err != nil {
			return err
		}
	}
	k.Tell(ctx)
	if k.Measured != nil {
		k.Measured(k.Uses())
	}
	return nil
}

// Measure counts every project's storage again, and only that (a
// follower's answer: it writes nothing).
func (k *Keeper) Measure(ctx context.Context, now time.Time) error { return k.count(ctx, now) }

func (k *Keeper) count(ctx context.Context, now time.Time) error {
	uses, err := k.Store.ProjectStorage(ctx)
	if err != nil {
		return err
	}
	ps, err := k.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	tables, used, quotas := map[string][]domain.StorageUse{}, map[string]int64{}, map[string]int64{}
	for _, u := range uses {
		tables[u.ProjectID] = append(tables[u.ProjectID], u)
		used[u.ProjectID] += u.Bytes
	}
	for _, p := range ps {
		quotas[p.ID] = p.StorageQuota
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.counted, k.tables, k.used, k.quotas = now, tables, used, quotas
	for p := range k.over {
		if !k.refused[p] && used[p] <= k.limit(quotas[p]) {
			delete(k.over, p) // under again: the next refusal is told
		}
	}
	k.refused = nil
	return nil
}

// Tell tells Reached of the projects newly at their quota: over it, or
// refused a write; once until a count finds them under it again.
func (k *Keeper) Tell(ctx context.Context) {
	var reached []Use
	k.mu.Lock()
	if k.over == nil {
		k.over = map[string]bool{}
	}
	for _, p := range slices.Sorted(maps.Keys(k.quotas)) { // told in the order of the projects
		q := k.quotas[p]
		if (k.used[p] > k.limit(q) || k.refused[p]) && !k.over[p] {
			reached = append(reached, Use{ProjectID: p, Used: k.used[p], Quota: k.limit(q)})
			k.over[p] = true
		}
	}
	k.mu.Unlock()
	if k.Reached != nil {
		for _, u := range reached {
			k.Reached(ctx, u.ProjectID, u.Used, u.Quota)
		}
	}
}

func (k *Keeper) limit(own int64) int64 {
	if own > 0 {
		return own
	}
	return k.Default
}

// Admit says whether project may keep bytes more (a write the quota
// bounds), and if so counts them. Before the first count every write is
// admitted (and counted then). A caller refused calls Tell after.
func (k *Keeper) Admit(project string, bytes int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.used == nil {
		return true
	}
	if k.used[project]+bytes > k.limit(k.quotas[project]) {
		if k.refused == nil {
			k.refused = map[string]bool{}
		}
		k.refused[project] = true
		return false
	}
	k.used[project] += bytes
	return true
}

// SetQuota records a project's new quota (the store has it already).
func (k *Keeper) SetQuota(project string, bytes int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.quotas == nil {
		k.quotas = map[string]int64{}
	}
	k.quotas[project] = bytes
}

// Uses is every project's storage, by project; Counted when it was last
// counted.
func (k *Keeper) Uses() []Use {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Use, 0, len(k.quotas))
	for _, p := range slices.Sorted(maps.Keys(k.quotas)) {
		out = append(out, Use{ProjectID: p, Used: k.used[p], Quota: k.limit(k.quotas[p]), Tables: slices.Clone(k.tables[p])})
	}
	return out
}

// Counted is when the storage was last counted (zero: never).
func (k *Keeper) Counted() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.counted
}

// Run counts at once, then every Every, until ctx ends; failures go to
// logf.
func (k *Keeper) Run(ctx context.Context, after func(time.Duration) <-chan time.Time, now func() time.Time, logf func(string, ...any)) {
	for {
		if err := k.Count(ctx, now()); err != nil && ctx.Err() == nil {
			logf("counting the projects' storage failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-after(Every):
		}
	}
}

// SpanBytes is what a work span costs in the count, as the store counts
// it: its text, its labels as stored, and a row's bytes.
func SpanBytes(w domain.WorkSpan) int64 {
	return int64(domain.StorageRowBytes + len(w.Key) + len(w.Namespace) + len(w.Name) + len(w.Job) + len(w.Account) +
		len(store.LabelsText(w.Labels)))
}
