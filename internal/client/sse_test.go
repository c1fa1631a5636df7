package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func readAll(t testing.TB, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	p := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := p.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// chunkReader returns its chunks one Read at a time, as a network would.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestSSEParse(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []sseEvent
	}{
		{"one event", []string{"id: 1\nevent: node_lifecycle_event\ndata: {}\n\n"},
			[]sseEvent{{ID: "1", Type: "node_lifecycle_event", Data: "{}"}}},
		{"keepalive comments between and inside", []string{": keepalive\n\n: keepalive\nid: 1\n: hi\ndata: a\n\n: keepalive\n\n"},
			[]sseEvent{{ID: "1", Type: "message", Data: "a"}}},
		{"two events in one chunk", []string{"id: 1\nevent: x\ndata: a\n\nid: 2\nevent: y\ndata: b\n\n"},
			[]sseEvent{{ID: "1", Type: "x", Data: "a"}, {ID: "2", Type: "y", Data: "b"}}},
		{"event split across chunks", []string{"id: 1\nev", "ent: x\nda", "ta: a", "bc\n", "\n"},
			[]sseEvent{{ID: "1", Type: "x", Data: "abc"}}},
		{"multi-line data", []string{"data: a\ndata:b\ndata:  c\n\n"},
			[]sseEvent{{Type: "message", Data: "a\nb\n c"}}},
		{"CRLF and CR line ends", []string{"id: 7\r\nevent: x\r\ndata: a\r\n\r\ndata: b\r", "\r"},
			[]sseEvent{{ID: "7", Type: "x", Data: "a"}, {ID: "7", Type: "message", Data: "b"}}},
		{"CRLF split across chunks", []string{"data: a\r", "\n\r", "\n"},
			[]sseEvent{{Type: "message", Data: "a"}}},
		{"no data, no dispatch; type resets", []string{"event: x\n\ndata: a\n\n"},
			[]sseEvent{{Type: "message", Data: "a"}}},
		{"unterminated last event dropped", []string{"data: a\n\ndata: b\n"},
			[]sseEvent{{Type: "message", Data: "a"}}},
		{"field without colon, retry, unknown", []string{"data\nretry: 10\nfoo: bar\n\n"},
			[]sseEvent{{Type: "message", Data: ""}}},
		{"id with NUL ignored", []string{"id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\n"},
			[]sseEvent{{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, &chunkReader{chunks: append([]string(nil), tc.in...)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSSETooLarge(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1000) + "\n"
	_, err := readAll(t, strings.NewReader(strings.Repeat(line, 1100)+"\n"))
	if err == nil {
		t.Fatal("want an error for an event over the size limit")
	}
}

func sseEvent1(cursor, reason string) string {
	return fmt.Sprintf("id: %s\nevent: node_lifecycle_event\ndata: {\"event_id\":\"e%s\",\"cursor\":%q,\"cluster_id\":\"c1\",\"node_name\":\"gpu-preemptible-dp-1\",\"reason\":%q,\"message\":\"m\",\"timestamp\":\"2025-01-02T03:04:05Z\"}\n\n", cursor, cursor, cursor, reason)
}

func TestWatchEvents(t *testing.T) {
	var gotQuery, gotAccept, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery, gotAccept, gotAuth = r.URL.RawQuery, r.Header.Get("Accept"), r.Header.Get("Authorization")
		if r.URL.Path != "/v1/clusters/c1/events" {
			http.Error(w, "bad path", 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fl := w.(http.Flusher)
		io.WriteString(w, ": keepalive\n\n")
		fl.Flush()
		// Two events in one write, then one split over two writes, then an
		// event of an unknown type the client must skip.
		io.WriteString(w, sseEvent1("11", "NodeAdded")+sseEvent1("12", "PreemptionNotified"))
		fl.Flush()
		ev := sseEvent1("13", "NodeRemoved")
		io.WriteString(w, ev[:30])
		fl.Flush()
		io.WriteString(w, ev[30:]+": keepalive\n\nevent: other\ndata: {}\n\n")
		fl.Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []apiv1.Event
	err := New(srv.URL, "tok").WatchEvents(ctx, "c1", "10", func(e apiv1.Event) error {
		got = append(got, e)
		if len(got) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if gotQuery != "cursor=10&watch=true" || gotAccept != "text/event-stream" || gotAuth != "Bearer tok" {
		t.Errorf("query %q accept %q auth %q", gotQuery, gotAccept, gotAuth)
	}
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Cursor+":"+e.Reason)
	}
	if strings.Join(reasons, ",") != "11:NodeAdded,12:PreemptionNotified,13:NodeRemoved" {
		t.Errorf("events = %v", reasons)
	}
	if want := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC); !got[0].Timestamp.Equal(want) {
		t.Errorf("timestamp = %v", got[0].Timestamp)
	}
}

func TestWatchEventsEnds(t *testing.T) {
	handler := func(status int, ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	stop := errors.New("stop")
	cases := []struct {
		name string
		h    http.HandlerFunc
		fn   func(apiv1.Event) error
		want func(error) bool
	}{
		{"server closes", handler(200, "text/event-stream", sseEvent1("1", "NodeAdded")), nil,
			func(err error) bool { return errors.Is(err, ErrStreamClosed) }},
		{"callback error stops", handler(200, "text/event-stream", sseEvent1("1", "NodeAdded")+sseEvent1("2", "NodeAdded")),
			func(apiv1.Event) error { return stop },
			func(err error) bool { return errors.Is(err, stop) }},
		{"api error", handler(404, "application/json", `{"error":{"code":"not_found","message":"no cluster"}}`), nil,
			IsNotFound},
		{"not an event stream", handler(200, "application/json", `{"node_lifecycle_events":[]}`), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "text/event-stream") }},
		{"bad event JSON", handler(200, "text/event-stream", "event: node_lifecycle_event\ndata: {\n\n"), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "decode event") }},
		{"cursor from id when data lacks it", handler(200, "text/event-stream", "id: 42\nevent: node_lifecycle_event\ndata: {\"reason\":\"NodeAdded\"}\n\n"),
			func(e apiv1.Event) error {
				if e.Cursor != "42" {
					return fmt.Errorf("cursor %q", e.Cursor)
				}
				return stop
			},
			func(err error) bool { return errors.Is(err, stop) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			fn := tc.fn
			if fn == nil {
				fn = func(apiv1.Event) error { return nil }
			}
			err := New(srv.URL, "t").WatchEvents(context.Background(), "c1", "", fn)
			if !tc.want(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func FuzzParseSSE(f *testing.F) {
	for _, s := range []string{
		"",
		sseEvent1("1", "NodeAdded"),
		": keepalive\n\n",
		"data: a\r\ndata: b\r\rid: 3\ndata\n\n",
		"event: x\n\n\n\ndata:\n\n",
		"id: \x00\ndata: z\n\n",
		"data: a\r",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		// Parse whole, and parse fed in small chunks: the answers must agree,
		// so chunk boundaries never change what the client sees.
		whole, errWhole := readAll(t, strings.NewReader(string(in)))
		n := int(split%16) + 1
		var chunks []string
		for s := string(in); s != ""; {
			k := min(n, len(s))
			chunks = append(chunks, s[:k])
			s = s[k:]
		}
		parts, errParts := readAll(t, &chunkReader{chunks: chunks})
		if (errWhole == nil) != (errParts == nil) {
			t.Fatalf("errors differ: %v vs %v", errWhole, errParts)
		}
		if errWhole == nil && !reflect.DeepEqual(whole, parts) {
			t.Fatalf("chunking changed the result:\n%q\n%q", whole, parts)
		}
		for _, ev := range whole {
			if ev.Type == "" {
				t.Fatalf("event without type: %+v", ev)
			}
			if strings.ContainsAny(ev.Data, "\r") || strings.ContainsAny(ev.Type, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
				t.Fatalf("line terminator leaked into event: %q", ev)
			}
		}
	})
}
