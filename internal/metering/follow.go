package metering

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// A meter whose Reads is the leader's in-memory copy follows its commits
// (store.Cached.Watch): it notes each node written since its last pass,
// so a pass looks only at those (nodes that became ready, stopped, or
// changed class) rather than listing the stopped ones from the database
// and walking every running one, unless running records need rewriting
// or reporting (walking). The first pass after it starts to follow, or
// after the copy was dropped, lists every node still to meter.

// follower is the meter's store.Watcher.
type follower struct {
	mu      sync.Mutex
	on      bool            // following: the copy calls Apply
	pending map[string]bool // nodes written since the last pass
}

func (f *follower) Load(store.Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.pending = true, map[string]bool{}
}

func (f *follower) Apply(w store.Written) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range w.Nodes {
		f.pending[n.ID] = true
	}
	for _, id := range w.GoneNodes {
		f.pending[id] = true
	}
}

func (f *follower) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.pending = false, nil
}

// take returns the nodes written since the last take, in ID order, and
// whether the follower followed all along (false: nothing to go by).
func (f *follower) take() ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return nil, false
	}
	ids := make([]string, 0, len(f.pending))
	for id := range f.pending {
		ids = append(ids, id)
	}
	clear(f.pending)
	slices.Sort(ids)
	return ids, true
}

// watcher is what the meter's Reads offers to follow its commits.
type watcher interface {
	Watch(ctx context.Context, w store.Watcher) error
}

// follow makes the meter follow Reads' commits if it can and does not
// yet; it reports whether a pass may go by what changed (it followed
// since the last pass, and before).
func (m *Meter) follow(ctx context.Context) ([]string, bool, error) {
	ids, ok := m.follower.take()
	if ok {
		return ids, true, nil
	}
	w, can := m.Reads.(watcher)
	if !can {
		return nil, false, nil
	}
	if err := w.Watch(ctx, &m.follower); err != nil && !errors.Is(err, store.ErrNotCached) {
		return nil, false, fmt.Errorf("meter: follow the copy: %w", err)
	}
	return nil, false, nil // this pass lists everything
}

// walking: the pass must look at every running node too (their records
// are rewritten every Refresh, or what they bill is reported).
func (m *Meter) walking() bool {
	return m.OnBilled != nil || m.Refresh < NoRefresh
}

// NoRefresh is a Refresh that never comes: running records are written
// when they start and by Cut (a simulation's meter, which cuts them all at
// its end), so a pass looks only at the nodes written since the last.
const NoRefresh = time.Duration(1 << 62)

// changed are the nodes of ids to meter: those that became ready, as the
// store has them now.
func (m *Meter) changed(ctx context.Context, ids []string) ([]*domain.Node, error) {
	out := make([]*domain.Node, 0, len(ids))
	for _, id := range ids {
		n, err := m.store.GetNode(ctx, id)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("meter: read node %s: %w", id, err)
		}
		if !n.ReadyAt.IsZero() {
			out = append(out, &n)
		}
	}
	return out, nil
}

func isNotFound(err error) bool { return errors.Is(err, domain.ErrNotFound) }
