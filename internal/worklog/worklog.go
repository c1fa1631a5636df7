// Package worklog records what work ran on each node and when: spans of
// the tenants' pods and Slurm jobs, from what each cluster's driver
// already watches (driver.ClusterDriver.Running). Cost allocation splits
// a node's priced usage among them.
//
// A pass writes only what changed since the last: the spans of work that
// appeared, and the end of those that went. A span's end is the pass that
// first missed it, so it is known to a pass's period. What a driver cannot
// tell now (a watch not synced, a Slurm poll too old) is left as it was:
// the spans of its nodes stay open until a pass can tell. The open spans
// are read back from the store when a process starts, so a restart neither
// loses nor repeats a span.
package worklog

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/store"
)

// Source tells what runs on a node (a driver's Running).
type Source interface {
	Running(clusterID, nodeName string) ([]domain.Running, bool)
}

// MaxPerNode bounds the units of work recorded per node at once: a node's
// GPUs bound those that hold GPUs, and a tenant must not grow the store by
// running more.
const MaxPerNode = 64

// Recorder records work spans.
type Recorder struct {
	store store.Store
	reads interface {
		Snapshot(context.Context) (store.Snapshot, error)
	}
	source Source
	clock  clock.Clock
	log    *slog.Logger
	// open are the spans that have not ended, by node then key.
	open   map[string]map[string]domain.WorkSpan
	loaded bool
	// Admit, if set, says whether a project may keep a new span of bytes
	// (its storage quota: quota.Keeper); a span refused is not recorded,
	// and is asked about again at the next pass while it runs.
	Admit func(project string, bytes int64) bool
	// Refused, if set, is called after a pass that refused a span.
	Refused func(ctx context.Context)
}

// New returns a recorder of the nodes in reads' snapshots (the leader's
// in-memory copy) as source tells them, written to st.
func New(st store.Store, reads interface {
	Snapshot(context.Context) (store.Snapshot, error)
}, source Source, clk clock.Clock, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{store: st, reads: reads, source: source, clock: clk, log: log, open: map[string]map[string]domain.WorkSpan{}}
}

// Run makes a pass every period until ctx ends.
func (r *Recorder) Run(ctx context.Context, every time.Duration) {
	for {
		if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("recording work spans", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(every):
		}
	}
}

// Pass records what changed since the last pass, in one transaction; on
// an error nothing of it is kept and the next pass does it again.
func (r *Recorder) Pass(ctx context.Context) error {
	if !r.loaded {
		if err := r.load(ctx); err != nil {
			return err
		}
	}
	snap, err := r.reads.Snapshot(ctx)
	if err != nil {
		return err
	}
	now := r.clock.Now().UTC().Truncate(time.Second)
	add, end, progressed := r.changes(snap, now)
	if n := len(add); r.Admit != nil {
		if add = r.admitted(add); len(add) < n && r.Refused != nil {
			r.Refused(ctx)
		}
	}
	if len(add) == 0 && len(end) == 0 && len(progressed) == 0 {
		return nil
	}
	err = r.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.AddWorkSpans(ctx, add); err != nil {
			return err
		}
		if err := tx.SetWorkProgress(ctx, progressed); err != nil {
			return err
		}
		return tx.EndWorkSpans(ctx, end)
	})
	if err != nil {
		return err
	}
	for _, w := range add {
		r.keep(w)
	}
	for _, w := range progressed {
		r.keep(w)
	}
	for _, w := range end {
		delete(r.open[w.NodeID], w.Key)
		if len(r.open[w.NodeID]) == 0 {
			delete(r.open, w.NodeID)
		}
	}
	return nil
}

// admitted are the spans of add the projects' quotas admit.
func (r *Recorder) admitted(add []domain.WorkSpan) []domain.WorkSpan {
	if r.Admit == nil {
		return add
	}
	kept := add[:0]
	for _, w := range add {
		if r.Admit(w.ProjectID, quota.SpanBytes(w)) {
			kept = append(kept, w)
		}
	}
	return kept
}

func (r *Recorder) keep(w domain.WorkSpan) {
	if r.open[w.NodeID] == nil {
		r.open[w.NodeID] = map[string]domain.WorkSpan{}
	}
	r.open[w.NodeID][w.Key] = w
}

func (r *Recorder) load(ctx context.Context) error {
	err := r.store.ScanWorkSpans(ctx, store.WorkSpanFilter{Open: true}, func(w domain.WorkSpan) error {
		r.keep(w)
		return nil
	})
	r.loaded = err == nil
	return err
}

// changes are the spans that started, those that ended as of now, and
// the open ones whose job reported more progress (a span keeps the most
// its work reached).
func (r *Recorder) changes(snap store.Snapshot, now time.Time) (add, end, progressed []domain.WorkSpan) {
	project := make(map[string]string, len(snap.Clusters))
	for _, c := range snap.Clusters {
		project[c.ID] = c.ProjectID
	}
	// told: the nodes whose work the source told, and what it said.
	told := map[string]map[string]bool{}
	for _, n := range snap.Nodes {
		if n.ReadyAt.IsZero() {
			continue
		}
		running, known := r.source.Running(n.ClusterID, n.Name)
		if !known {
			continue
		}
		if len(running) == 0 && len(r.open[n.ID]) == 0 {
			continue // nothing ran, nothing runs: most of an idle fleet
		}
		seen := map[string]bool{}
		told[n.ID] = seen
		slices.SortFunc(running, func(a, b domain.Running) int { return cmp.Compare(a.Key, b.Key) })
		for _, u := range running[:min(len(running), MaxPerNode)] {
			if seen[u.Key] {
				continue
			}
			seen[u.Key] = true
			if w, ok := r.open[n.ID][u.Key]; ok {
				if p := min(max(u.Progress, 0), domain.MaxProgress); p > w.Progress {
					w.Progress = p
					progressed = append(progressed, w)
				}
				continue
			}
			add = append(add, domain.WorkSpan{ProjectID: project[n.ClusterID], ClusterID: n.ClusterID, NodeID: n.ID,
				Running: started(u, n.ReadyAt, now)})
		}
	}
	live := make(map[string]bool, len(snap.Nodes))
	for _, n := range snap.Nodes {
		live[n.ID] = true
	}
	// A span ends when the source told its node without it, or its node
	// is gone from the fleet; a node the source cannot tell keeps its own.
	for node, spans := range r.open {
		seen, ok := told[node]
		if !ok && live[node] {
			continue
		}
		for key, w := range spans {
			if !seen[key] {
				w.End = now
				end = append(end, w)
			}
		}
	}
	slices.SortFunc(end, func(a, b domain.WorkSpan) int {
		return cmp.Or(cmp.Compare(a.NodeID, b.NodeID), cmp.Compare(a.Key, b.Key))
	})
	return add, end, progressed
}

// started is u as recorded: its start within [ready, now] (unknown: now),
// in whole seconds, and at most domain.MaxWorkLabels labels (the first
// by key).
func started(u domain.Running, ready, now time.Time) domain.Running {
	switch {
	case u.Start.IsZero() || u.Start.After(now):
		u.Start = now
	case u.Start.Before(ready):
		u.Start = ready
	}
	u.Start = u.Start.UTC().Truncate(time.Second)
	if len(u.Labels) > domain.MaxWorkLabels {
		keys := slices.Sorted(maps.Keys(u.Labels))[:domain.MaxWorkLabels]
		kept := make(map[string]string, len(keys))
		for _, k := range keys {
			kept[k] = u.Labels[k]
		}
		u.Labels = kept
	}
	u.GPUs = max(u.GPUs, 0)
	u.Progress = min(max(u.Progress, 0), domain.MaxProgress)
	return u
}
