package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

func eventView(e domain.Event) apiv1.Event {
	return apiv1.Event{
		EventID: e.ID, Cursor: strconv.FormatInt(e.Seq, 10), ClusterID: e.ClusterID, NodeID: e.NodeID, NodeName: e.NodeName,
		Reason: string(e.Reason), Message: e.Message, Timestamp: e.Timestamp.UTC(), Deadline: timePtr(e.Deadline),
	}
}

func parseCursor(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("cursor", "cursor %q is not one this API returned", echo(v))
	}
	return n, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	// Events outlive their cluster (they are kept 72 hours), so a deleted
	// cluster's history stays readable by its project.
	id := r.PathValue("id")
	c, err := s.store.GetClusterRecord(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && !p.sees(c.ProjectID)) {
		err = notFound("cluster %q not found", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	// A reconnecting EventSource sends Last-Event-ID and repeats the URL it
	// first opened, so the header takes precedence over ?cursor=.
	cursorText := r.Header.Get("Last-Event-ID")
	if cursorText == "" {
		cursorText = q.Get("cursor")
	}
	cursor, err := parseCursor(cursorText)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > 1000 {
			s.fail(w, r, invalid("limit", "limit must be between 1 and 1000; got %q", echo(v)))
			return
		}
	}
	watch := false
	if v := q.Get("watch"); v != "" {
		watch, err = strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, invalid("watch", "watch must be true or false; got %q", echo(v)))
			return
		}
	}
	if watch {
		s.stream(w, r, p, c.ID, cursor)
		return
	}
	evs, err := s.store.ListEvents(ctx, store.EventFilter{ClusterID: c.ID, AfterSeq: cursor, Limit: limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.EventList{Events: make([]apiv1.Event, 0, len(evs)), NextCursor: strconv.FormatInt(cursor, 10)}
	for _, e := range evs {
		out.Events = append(out.Events, eventView(e))
		out.NextCursor = strconv.FormatInt(e.Seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// stream sends the cluster's events after cursor as Server-Sent Events,
// then each new one as it is committed, until the client goes away.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p principal, clusterID string, cursor int64) {
	ctx := r.Context()
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, errors.New("streaming unsupported by this connection"))
		return
	}
	// A project's streams are counted together, whatever token opened
	// them: minting tokens does not buy more. Operators count by token.
	holder, whose := p.key, "this token"
	if !p.admin {
		holder, whose = "project:"+p.project, "project "+p.project
	}
	if !s.streams.acquire(holder, s.MaxStreams) {
		writeError(w, http.StatusTooManyRequests, apiv1.CodeRateLimited, "",
			fmt.Sprintf("%s already has %d event streams open, the most it may (--max-streams-per-project); close one first", whose, s.MaxStreams))
		return
	}
	defer s.streams.release(holder)
	// A stream lives as long as its client: the server's read deadline
	// (which bounds a request) is lifted, and each write gets a deadline
	// of its own, so a client that stops reading is let go.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	writing := func() { _ = rc.SetWriteDeadline(s.realClock.Now().Add(streamWriteTimeout)) }
	writing()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	keepAliveAt := s.realClock.Now().Add(s.KeepAlive)
	for {
		changed := s.ctrl.Changed()
		evs, err := s.store.ListEvents(ctx, store.EventFilter{ClusterID: clusterID, AfterSeq: cursor, Limit: 500})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("event stream", "cluster", clusterID, "err", err)
			}
			return
		}
		writing()
		for _, e := range evs {
			data, _ := json.Marshal(eventView(e))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: node_lifecycle_event\ndata: %s\n\n", e.Seq, data); err != nil {
				return
			}
			cursor = e.Seq
		}
		flusher.Flush()
		if len(evs) == 500 {
			continue // more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-s.realClock.After(keepAliveAt.Sub(s.realClock.Now())):
			keepAliveAt = s.realClock.Now().Add(s.KeepAlive)
			// A stream outlives the check its request passed: a token
			// revoked or expired since ends it here.
			if t, err := s.store.TokenByHash(ctx, p.key); errors.Is(err, domain.ErrNotFound) || (err == nil && tokenState(t, s.wall.Now()) != "") {
				return
			}
			writing()
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// streamWriteTimeout bounds one write of an event stream: a client that
// reads nothing for this long is disconnected.
const streamWriteTimeout = 30 * time.Second

// streamCounts counts open event streams by holder: a project, or an
// operator's token.
type streamCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire counts one more stream for key unless it has max already (max
// 0: no cap).
func (c *streamCounts) acquire(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max > 0 && c.n[key] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return true
}

func (c *streamCounts) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}
