package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// t0 is "now" in every CLI test.
var t0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

// autoClock is a clock whose After returns at once and moves time forward
// by the wait, so --wait loops and timeouts run instantly and
// deterministically.
type autoClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *autoClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// request is one request as the fake API saw it.
type request struct {
	Method, Path, Query, Auth string
	Body                      map[string]any
}

func (r request) String() string { return r.Method + " " + r.Path }

// fakeAPI is an httptest server whose routes the test sets, recording
// every request.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server
	mux *http.ServeMux

	mu   sync.Mutex
	reqs []request
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, mux: http.NewServeMux()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.Body); err != nil {
				t.Errorf("%s: body is not a JSON object: %q", rec, b)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// handle answers pattern (a ServeMux pattern such as "GET /v1/capacity")
// with status and v as JSON.
func (f *fakeAPI) handle(pattern string, status int, v any) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, status, v)
	})
}

// sequence answers pattern with the given cluster states in turn, the last
// one forever after.
func (f *fakeAPI) sequence(pattern string, answers ...func(w http.ResponseWriter)) {
	var mu sync.Mutex
	i := 0
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := answers[min(i, len(answers)-1)]
		i++
		mu.Unlock()
		a(w)
	})
}

func ok(v any) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { writeJSON(w, 200, v) }
}

func apiErr(status int, code, msg string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		writeJSON(w, status, apiv1.Error{Error: apiv1.ErrorBody{Code: code, Message: msg}})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

// only returns the requests with the given method and path.
func (f *fakeAPI) only(method, path string) []request {
	var out []request
	for _, r := range f.requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	stdout, stderr string
	err            error
}

func testEnv(vars map[string]string) env {
	return env{
		clock:        &autoClock{now: t0},
		getenv:       func(k string) string { return vars[k] },
		loc:          time.UTC,
		pollInterval: time.Second,
	}
}

// run executes the CLI against the fake API with a token, in a clean
// environment (no config file is found: SPARECAP_CONFIG points nowhere).
func (f *fakeAPI) run(args ...string) result {
	f.t.Helper()
	e := testEnv(map[string]string{"SPARECAP_CONFIG": f.t.TempDir() + "/none.yaml"})
	return runCLI(context.Background(), e, append([]string{"--url", f.srv.URL, "--token", "tok-1"}, args...)...)
}

// follow runs a streaming command (events --follow) against the fake API
// until its output holds until, interrupts it as Ctrl-C would, checks that
// it ended without an error, and returns what it printed.
func (f *fakeAPI) follow(t *testing.T, until string, args ...string) string {
	t.Helper()
	var out, errb syncBuffer
	root := newRoot(testEnv(map[string]string{"SPARECAP_URL": f.srv.URL, "SPARECAP_CONFIG": t.TempDir() + "/x"}))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	give := time.After(10 * time.Second)
	for !strings.Contains(out.String(), until) {
		select {
		case err := <-done:
			t.Fatalf("command ended early: %v\n%s", err, errb.String())
		case <-give:
			t.Fatalf("%q never printed:\n%s", until, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted follow returned %v, want nil", err)
	}
	return out.String()
}

func runCLI(ctx context.Context, e env, args ...string) result {
	var out, errb syncBuffer
	root := newRoot(e)
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}
