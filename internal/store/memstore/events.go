package memstore

import (
	"cmp"
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// eventTables are the events by Seq, by their de-duplication key
// (cluster, node, reason), by cluster then Seq, and by timestamp (NULL
// first) then Seq for pruning.
type eventTables struct {
	events     tree[int64, *domain.Event]
	eventKeys  tree[sss, int64]
	eventsOf   tree[stid, *domain.Event]
	eventTimes tree[ii, struct{}]
}

func newEventTables() eventTables {
	return eventTables{events: newTree[int64, *domain.Event](cmp.Compare[int64]), eventKeys: newTree[sss, int64](cmpSSS),
		eventsOf: newTree[stid, *domain.Event](cmpSTID), eventTimes: newTree[ii, struct{}](cmpII)}
}

func eventKey(e *domain.Event) sss { return sss{e.ClusterID, e.NodeID, string(e.Reason)} }

func (t *tx) AddEvent(ctx context.Context, e domain.Event) (domain.Event, error) {
	if err := t.write(ctx); err != nil {
		return e, err
	}
	defer t.unlock()
	t.addEvent(&e)
	// Hand back what a later read returns, as sqlstore does.
	e.Timestamp, e.Deadline = readBack(e.Timestamp), readBack(e.Deadline)
	return e, nil
}

// addEvent stores e, replacing the event of its key, and sets e.Seq.
func (t *tx) addEvent(e *domain.Event) {
	t.st.eventSeq++
	e.Seq = t.st.eventSeq
	s := *e
	s.Message = text(s.Message) // built from what a driver observed
	s.Timestamp, s.Deadline = dbTime(s.Timestamp), dbTime(s.Deadline)
	g := t.w
	if seq, ok := t.st.eventKeys.set(g, eventKey(&s), s.Seq); ok {
		old, _ := t.st.events.get(seq)
		t.unlinkEvent(old)
	}
	t.st.events.set(g, s.Seq, &s)
	t.st.eventsOf.set(g, stid{s: s.ClusterID, t: s.Seq}, &s)
	t.st.eventTimes.set(g, ii{tkey(s.Timestamp), s.Seq}, struct{}{})
}

// dropEvent deletes a stored event.
func (t *tx) dropEvent(e *domain.Event) {
	t.st.eventKeys.delete(t.w, eventKey(e))
	t.unlinkEvent(e)
}

// unlinkEvent deletes a stored event from every table but eventKeys.
func (t *tx) unlinkEvent(e *domain.Event) {
	g := t.w
	t.st.events.delete(g, e.Seq)
	t.st.eventsOf.delete(g, stid{s: e.ClusterID, t: e.Seq})
	t.st.eventTimes.delete(g, ii{tkey(e.Timestamp), e.Seq})
}

// AddEvents adds each event in order, as AddEvent does.
func (t *tx) AddEvents(ctx context.Context, es []domain.Event) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for i := range es {
		e := es[i]
		t.addEvent(&e)
	}
	return nil
}

func (t *tx) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil // nothing is before the zero time
	}
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	// Events without a timestamp count as older than any time.
	cut := tkey(dbTime(before))
	var gone []int64
	t.st.eventTimes.each(func(k ii, _ struct{}) bool {
		if k.a >= cut {
			return false
		}
		gone = append(gone, k.b)
		return true
	})
	for _, seq := range gone {
		e, _ := t.st.events.get(seq)
		t.dropEvent(e)
	}
	return len(gone), nil
}

func (v view) ListEvents(ctx context.Context, f store.EventFilter) ([]domain.Event, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.Event{}
	add := func(seq int64, e *domain.Event) bool {
		if seq <= f.AfterSeq {
			return true
		}
		if f.Limit > 0 && len(out) >= f.Limit {
			return false
		}
		out = append(out, *e)
		return true
	}
	if f.ClusterID == "" {
		v.st.events.ascend(&f.AfterSeq, add)
		return out, nil
	}
	v.st.eventsOf.ascend(&stid{s: f.ClusterID, t: f.AfterSeq}, func(k stid, e *domain.Event) bool {
		return k.s == f.ClusterID && add(k.t, e)
	})
	return out, nil
}
