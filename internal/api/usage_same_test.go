package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sparecap/sparecap/internal/store"
)

// TestUsageStreamSameBytes: on 20,000 records of every kind, every
// group_by and format gives the bytes the in-memory implementation gave.
func TestUsageStreamSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20,000-record store")
	}
	s, from := usageFixture(t, 20_000)
	ctx := context.Background()
	b, err := s.book(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, period := range [][2]int{{0, 1}, {0, 0}, {3, 1}} {
		start, end := from.AddDate(0, 0, period[0]), from.AddDate(0, period[1], 0)
		if period[1] == 0 {
			end = start.AddDate(0, 0, 2)
		}
		recs, err := s.store.ListUsage(ctx, store.UsageFilter{ProjectID: "p", From: start, To: end})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"node", "cluster", "compute_class", "day"} {
			for _, csvOut := range []bool{false, true} {
				want := refUsage(b, recs, start, end, g, csvOut)
				path := "/v1/usage" + q(start, end, "project_id", "p", "group_by", g)
				if csvOut {
					path += "&format=csv"
				}
				sameBytes(t, s, path, want, csvOut)
			}
		}
	}
	// No records at all.
	start := from.AddDate(1, 0, 0)
	for _, csvOut := range []bool{false, true} {
		path := "/v1/usage" + q(start, start.AddDate(0, 0, 1), "project_id", "p")
		if csvOut {
			path += "&format=csv"
		}
		sameBytes(t, s, path, refUsage(b, nil, start, start.AddDate(0, 0, 1), "node", csvOut), csvOut)
	}
}

// sameBytes checks that path answers want (indented, as writeJSON writes
// outside a request) when asked for ?pretty, and want compacted
// otherwise; CSV is the same either way.
func sameBytes(t *testing.T, s *Server, path string, want []byte, csvOut bool) {
	t.Helper()
	compact := want
	if !csvOut {
		var buf bytes.Buffer
		if err := json.Compact(&buf, want); err != nil {
			t.Fatal(err)
		}
		compact = append(buf.Bytes(), '\n')
	}
	for _, tc := range []struct {
		path string
		want []byte
	}{{path, compact}, {path + "&pretty", want}} {
		if got := serveBody(t, s, tc.path); string(got) != string(tc.want) {
			t.Errorf("%s: %d bytes differ from the %d of the in-memory implementation\n got %.300s\nwant %.300s",
				tc.path, len(got), len(tc.want), got, tc.want)
		}
	}
}

func serveBody(t *testing.T, s *Server, path string) []byte {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
	}
	return body
}
