package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// EventTypeNodeLifecycle is the SSE event type of a node lifecycle event.
const EventTypeNodeLifecycle = "node_lifecycle_event"

// ErrStreamClosed is returned by WatchEvents when the server ends the event
// stream. Resume with the cursor of the last event received.
var ErrStreamClosed = errors.New("event stream closed by server")

// maxSSEEvent bounds one event (a line, or the data of one event) so a
// broken or hostile stream cannot make the client buffer without limit.
const maxSSEEvent = 1 << 20

// WatchEvents streams the node lifecycle events of a cluster that come after
// cursor (empty: from the oldest kept), calling fn for each in order. It
// returns fn's error if fn fails, ctx.Err() once ctx is done, and
// ErrStreamClosed if the server ends the stream. It does not reconnect.
func (c *Client) WatchEvents(ctx context.Context, clusterID, cursor string, fn func(apiv1.Event) error) error {
	q := url.Values{"watch": {"true"}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := clusterPath(clusterID, "events")
	resp, err := c.send(ctx, http.MethodGet, path, q, nil, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("watch events of %s: server answered %q, want text/event-stream", clusterID, resp.Header.Get("Content-Type"))
	}
	r := newSSEReader(resp.Body)
	for {
		ev, err := r.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return ErrStreamClosed
			}
			return fmt.Errorf("watch events of %s: %w", clusterID, err)
		}
		// Unknown event types are skipped so the server can add new ones.
		if ev.Type != EventTypeNodeLifecycle {
			continue
		}
		var e apiv1.Event
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return fmt.Errorf("watch events of %s: decode event %q: %w", clusterID, ev.ID, err)
		}
		if e.Cursor == "" {
			e.Cursor = ev.ID
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	// ID is the last event ID seen on the stream (it persists across events,
	// as in the EventSource spec).
	ID string
	// Type is the event field, "message" when absent.
	Type string
	// Data is the data lines joined by "\n".
	Data string
}

// sseReader parses a text/event-stream as the WHATWG HTML spec describes:
// lines end in CRLF, LF or CR; a blank line dispatches the event; lines
// starting with ':' are comments (keepalives); an event with no data lines
// is not dispatched.
type sseReader struct {
	sc     *bufio.Scanner
	lastID string
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSEEvent)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc}
}

// Next returns the next event, or io.EOF at the end of the stream. An event
// cut off by the end of the stream is discarded, as the spec requires.
func (r *sseReader) Next() (sseEvent, error) {
	var (
		typ     string
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if !hasData {
				typ = ""
				continue
			}
			ev := sseEvent{ID: r.lastID, Type: typ, Data: data.String()}
			if ev.Type == "" {
				ev.Type = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > maxSSEEvent {
				return sseEvent{}, fmt.Errorf("server-sent event larger than %d bytes", maxSSEEvent)
			}
			data.Write(value)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		}
		// "retry" and unknown fields are ignored.
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// scanSSELines is a bufio.SplitFunc for SSE lines, which may end in "\r\n",
// "\n" or a lone "\r".
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// A CR: is it a CRLF? We need one more byte to know.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		// A last line without terminator: it can never be followed by the
		// blank line that dispatches, but it is still a line.
		return len(data), data, nil
	}
	return 0, nil, nil
}
