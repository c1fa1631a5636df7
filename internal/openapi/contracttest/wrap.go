package contracttest

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// reporter gathers a test's breaches and reports them when it ends; a
// stream that ends after that is not reported.
type reporter struct {
	mu   sync.Mutex
	errs []error
	done bool
}

func newReporter(t testing.TB) *reporter {
	r := &reporter{}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.done = true
		for _, err := range r.errs {
			t.Errorf("contract: %v", err)
		}
	})
	return r
}

func (r *reporter) add(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done && len(r.errs) < 20 {
		r.errs = append(r.errs, err)
	}
}

// InScope reports whether the document describes path's answers: the
// API and the health checks, not the console's pages or /metrics.
func InScope(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/healthz" || path == "/readyz"
}

// Client is an HTTP client whose exchanges are checked (see Transport).
func Client(t testing.TB) *http.Client {
	return &http.Client{Transport: Transport(t, nil)}
}

// Proxy serves target's answers at URL, checking each exchange of the
// API: for a browser, whose requests no transport of ours carries.
type Proxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

// NewProxy starts a Proxy of target, closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // event streams pass at once
	p := &Proxy{seen: map[string]int{}}
	checked := Handler(t, rp)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route, _ := c.route(r); route != nil && InScope(r.URL.Path) {
			p.mu.Lock()
			p.seen[route.Operation.OperationID]++
			p.mu.Unlock()
		}
		checked.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// Seen is how many exchanges of operation id passed the proxy.
func (p *Proxy) Seen(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[id]
}

// Handler serves h, checking every exchange against the document; a
// breach fails t when it ends.
func Handler(t testing.TB, h http.Handler) http.Handler {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	rep := newReporter(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !InScope(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		rep.add(c.Check(Exchange{Request: r, Body: body, Status: rec.status, Header: w.Header(), Response: rec.body.Bytes()}))
	})
}

// recorder passes an answer on and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Transport sends requests with base (nil: http.DefaultTransport),
// checking every exchange against the document; a breach fails t when
// it ends. A stream is checked when its reader closes it.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base, rep: newReporter(t)}
}

type transport struct {
	c    *Contract
	base http.RoundTripper
	rep  *reporter
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !InScope(req.URL.Path) {
		return t.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	x := Exchange{Request: req, Body: body, Status: resp.StatusCode, Header: resp.Header}
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media == SSEMedia {
		resp.Body = &streamCheck{ReadCloser: resp.Body, check: func(data []byte) {
			x.Response = data
			t.rep.add(t.c.Check(x))
		}}
		return resp, nil
	}
	x.Response, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(x.Response))
	if err == nil {
		t.rep.add(t.c.Check(x))
	}
	return resp, nil
}

// streamCheck keeps what a stream's reader read and checks it on Close.
type streamCheck struct {
	io.ReadCloser
	buf   bytes.Buffer
	once  sync.Once
	check func([]byte)
}

func (s *streamCheck) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.buf.Write(p[:n])
	return n, err
}

func (s *streamCheck) Close() error {
	s.once.Do(func() { s.check(s.buf.Bytes()) })
	return s.ReadCloser.Close()
}
