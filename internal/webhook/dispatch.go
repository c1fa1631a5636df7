package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The dispatcher turns lifecycle events into deliveries: it reads the
// events after its cursor, in Seq order (a store never makes an event
// visible below a Seq a reader has seen), and in one transaction writes
// a message and a delivery per endpoint that asked for the event, and
// moves the cursor past them. That transaction is the only promise: an
// event is dispatched once or, if the transaction did not commit, read
// again by the next dispatch (this leader's, or the next one's).
//
// Nothing on the reclaim's path waits for it: it reads what the
// controller committed, after the commit, on its own goroutine, and the
// only driver call it makes (the work on a node, for a drain notice's
// message) reads the driver's watch and is bounded by WorkTimeout.

// clusterInfo is what the dispatcher needs of an event's cluster; it
// never changes, so it is read once.
type clusterInfo struct {
	cluster domain.Cluster
	gone    bool // no record: the event is for no project
}

// errCursorMoved: the stored cursor is not where this dispatcher left it
// (another server dispatched): read it again.
var errCursorMoved = errors.New("the webhook cursor moved: another server dispatched")

func (s *Service) dispatchLoop(ctx context.Context) {
	for {
		var changed <-chan struct{}
		if s.cfg.Changed != nil {
			changed = s.cfg.Changed()
		}
		more, err := s.dispatch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.loaded = false // read the cursor again
			s.cfg.Log.Warn("dispatch lifecycle events to webhooks", "err", err)
			changed = nil // not in a tight loop: wait for the poll
		} else if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-s.cfg.Timer.After(s.cfg.Poll):
		}
	}
}

// pair is one delivery to make: event i to endpoint ep.
type pair struct {
	event int
	ep    domain.WebhookEndpoint
}

// dispatch makes the deliveries of the next batch of events and reports
// whether more events may be waiting.
func (s *Service) dispatch(ctx context.Context) (more bool, err error) {
	st := s.cfg.Store
	if !s.loaded {
		if s.stored, err = st.WebhookCursor(ctx); err != nil {
			return false, err
		}
		s.cursor, s.loaded, s.wroteAt = s.stored, true, s.cfg.Clock.Now()
	}
	evs, err := st.ListEvents(ctx, store.EventFilter{AfterSeq: s.cursor, Limit: dispatchBatch})
	if err != nil {
		return false, err
	}
	more = len(evs) == dispatchBatch
	if len(evs) == 0 {
		return false, s.checkpoint(ctx)
	}
	last := evs[len(evs)-1].Seq
	eps, err := st.ListWebhookEndpoints(ctx, "")
	if err != nil {
		return false, err
	}
	pairs, err := s.match(ctx, evs, eps)
	if err != nil {
		return false, err
	}
	if len(pairs) == 0 {
		// Nobody asked for these: move on without a write each time (the
		// controller commits events many times a second in a burst);
		// checkpoint bounds what a restart reads again.
		s.cursor = last
		return more, s.checkpoint(ctx)
	}
	now := s.cfg.Clock.Now()
	msgs, err := s.messages(ctx, evs, pairs, now)
	if err != nil {
		return false, err
	}
	if err := s.countBacklog(ctx, now); err != nil {
		return false, err
	}
	var queued map[string]int
	err = st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.WebhookCursor(ctx)
		if err != nil {
			return err
		}
		if cur != s.stored {
			return fmt.Errorf("%w (stored %d, expected %d)", errCursorMoved, cur, s.stored)
		}
		// An endpoint deleted or disabled since the read gets nothing;
		// one made since gets the next events.
		fresh, err := tx.ListWebhookEndpoints(ctx, "")
		if err != nil {
			return err
		}
		enabled := map[string]bool{}
		for _, e := range fresh {
			enabled[e.ID] = e.Enabled
		}
		var ms []domain.WebhookMessage
		var ds []domain.WebhookDelivery
		ms, ds, queued = s.deliveries(pairs, msgs, enabled, now) // fn may run again: from the same counts
		if err := tx.AddWebhookMessages(ctx, ms); err != nil {
			return err
		}
		if err := tx.AddWebhookDeliveries(ctx, ds); err != nil {
			return err
		}
		return tx.SetWebhookCursor(ctx, last)
	})
	if err != nil {
		return false, err
	}
	for ep, n := range queued {
		s.backlog.add(ep, n)
	}
	s.cursor, s.stored, s.wroteAt = last, last, now
	s.Kick()
	return more, nil
}

// deliveries are the messages and deliveries of pairs to the enabled
// endpoints, and how many deliveries each endpoint was queued. An
// endpoint with Config.MaxPending deliveries pending gets the rest as
// failed, not sent.
func (s *Service) deliveries(pairs []pair, msgs map[int]domain.WebhookMessage, enabled map[string]bool, now time.Time) (
	ms []domain.WebhookMessage, ds []domain.WebhookDelivery, queued map[string]int) {
	backlog, queued := s.backlog.snapshot(), map[string]int{}
	made := map[int]bool{}
	for _, p := range pairs {
		if !enabled[p.ep.ID] {
			continue
		}
		m := msgs[p.event]
		if !made[p.event] {
			ms, made[p.event] = append(ms, m), true
		}
		d := domain.WebhookDelivery{EndpointID: p.ep.ID, MessageID: m.ID, Type: m.Type, EventID: m.EventID,
			State: domain.DeliveryPending, NextAt: now, CreatedAt: now}
		if n := backlog[p.ep.ID] + queued[p.ep.ID]; n >= s.cfg.MaxPending {
			d.State, d.NextAt, d.LastAt = domain.DeliveryFailed, time.Time{}, now
			d.LastError = fmt.Sprintf("not sent: the endpoint has %d deliveries pending, the most it may; "+
				"the oldest are retried until they are delivered or their day is over", n)
		} else {
			queued[p.ep.ID]++
		}
		ds = append(ds, d)
	}
	return ms, ds, queued
}

// checkpoint writes the cursor if it moved and was last written more than
// checkpointEvery ago.
func (s *Service) checkpoint(ctx context.Context) error {
	now := s.cfg.Clock.Now()
	if s.cursor == s.stored || now.Sub(s.wroteAt) < checkpointEvery {
		return nil
	}
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.WebhookCursor(ctx)
		if err != nil {
			return err
		}
		if cur != s.stored {
			return fmt.Errorf("%w (stored %d, expected %d)", errCursorMoved, cur, s.stored)
		}
		return tx.SetWebhookCursor(ctx, s.cursor)
	})
	if err != nil {
		return err
	}
	s.stored, s.wroteAt = s.cursor, now
	return nil
}

// match pairs each event with the enabled endpoints of its cluster's
// project that ask for it.
func (s *Service) match(ctx context.Context, evs []domain.Event, eps []domain.WebhookEndpoint) ([]pair, error) {
	byProject := map[string][]domain.WebhookEndpoint{}
	for _, e := range eps {
		if e.Enabled {
			byProject[e.ProjectID] = append(byProject[e.ProjectID], e)
		}
	}
	if len(byProject) == 0 {
		return nil, nil
	}
	var out []pair
	for i, ev := range evs {
		if ev.ClusterID == "" {
			continue
		}
		c, err := s.cluster(ctx, ev.ClusterID)
		if err != nil {
			return nil, err
		}
		if c.gone {
			continue
		}
		for _, ep := range byProject[c.cluster.ProjectID] {
			if ep.Wants(ev.Reason, ev.ClusterID) {
				out = append(out, pair{event: i, ep: ep})
			}
		}
	}
	return out, nil
}

func (s *Service) cluster(ctx context.Context, id string) (clusterInfo, error) {
	if c, ok := s.clusters[id]; ok {
		return c, nil
	}
	c, err := s.cfg.Store.GetClusterRecord(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.clusters[id] = clusterInfo{gone: true}
	case err != nil:
		return clusterInfo{}, err
	default:
		s.clusters[id] = clusterInfo{cluster: c}
	}
	return s.clusters[id], nil
}

// messages makes the message of each event some endpoint asked for. The
// work on a drain notice's node is listed for all of them at once, each
// bounded by WorkTimeout: a cluster that does not answer in time costs
// its messages their list, not the others' delivery.
func (s *Service) messages(ctx context.Context, evs []domain.Event, pairs []pair, now time.Time) (map[int]domain.WebhookMessage, error) {
	want := map[int]bool{}
	for _, p := range pairs {
		want[p.event] = true
	}
	works := make(map[int]*Work, len(want))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range want {
		ev := evs[i]
		if !drainNotice(ev) {
			continue
		}
		c := s.clusters[ev.ClusterID].cluster
		wg.Go(func() {
			w := s.listWork(ctx, c, ev.NodeName)
			mu.Lock()
			works[i] = w
			mu.Unlock()
		})
	}
	wg.Wait()
	out := make(map[int]domain.WebhookMessage, len(want))
	for i := range want {
		m, err := eventMessage(evs[i], s.clusters[evs[i].ClusterID].cluster, works[i], now)
		if err != nil {
			return nil, fmt.Errorf("make the webhook message of event %s: %w", evs[i].ID, err)
		}
		out[i] = m
	}
	return out, nil
}

// listWork lists the work on a node, within WorkTimeout.
func (s *Service) listWork(ctx context.Context, c domain.Cluster, node string) *Work {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WorkTimeout)
	defer cancel()
	type result struct {
		w   *Work
		err error
	}
	done := make(chan result, 1)
	go func() {
		ws, err := s.cfg.Driver.ListWork(ctx, c.ID, node)
		done <- result{workOf(c.Type, ws), err}
	}()
	// A driver that does not heed its context is not waited for either.
	select {
	case r := <-done:
		if r.err == nil {
			return r.w
		}
		if ctx.Err() == nil {
			return &Work{Unavailable: "the node's work could not be listed: " + bound.Line(r.err.Error(), maxErrorText)}
		}
	case <-ctx.Done():
	}
	return &Work{Unavailable: fmt.Sprintf("the cluster did not list the node's work within %s", s.cfg.WorkTimeout)}
}
