package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const testAdmin = "adm-0123456789abcdef0123456789abcdef"

// limited starts a server with limits and returns it, a project token
// and its log.
func limited(t *testing.T, lim Limits) (*Server, string, *logBuffer) {
	t.Helper()
	dir := t.TempDir()
	logs := &logBuffer{}
	srv, err := Start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: testAdmin,
		ConfigPath: filepath.Join(dir, "cli.yaml"), Limits: lim,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	p, err := client.New(srv.URL, testAdmin).CreateProject(context.Background(), "team")
	if err != nil {
		t.Fatal(err)
	}
	return srv, p.Token, logs
}

// dial opens a raw connection to srv.
func dial(t *testing.T, srv *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads from c until the server closes it, and fails unless
// that happens within d.
func closedWithin(t *testing.T, what string, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	// EOF or a reset (the server closed with the client's bytes unread)
	// both mean closed; only the read deadline means still open.
	if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: still open after %s", what, d)
	} else if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%s: %v", what, err)
	}
}

// TestSlowClientsAreCut: a request whose body trickles in, with a token or
// without, and a kept-alive connection left idle are closed within the
// configured timeouts, so no client holds connections open at will.
func TestSlowClientsAreCut(t *testing.T) {
	srv, token, _ := limited(t, Limits{ReadTimeout: time.Second, IdleTimeout: time.Second})
	trickle := func(c net.Conn, auth string) {
		fmt.Fprintf(c, "POST /v1/clusters HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", auth)
		go func() {
			for range 50 {
				time.Sleep(200 * time.Millisecond)
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for i := range 6 {
		c := dial(t, srv)
		auth := ""
		if i%2 == 0 {
			auth = "Authorization: Bearer " + token + "\r\n"
		}
		trickle(c, auth)
		wg.Go(func() { closedWithin(t, fmt.Sprintf("slow body %d (token %v)", i, auth != ""), c, 4*time.Second) })
	}
	idle := dial(t, srv)
	fmt.Fprint(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health check: %v %v", resp, err)
	}
	resp.Body.Close()
	wg.Go(func() { closedWithin(t, "idle kept-alive connection", idle, 4*time.Second) })
	wg.Wait()
}

// TestBodiesAreCapped: a 10 MB sign-in form and oversized API bodies (the
// token endpoint's too) are refused with 413 in the API's error shape,
// without the server reading them into memory.
func TestBodiesAreCapped(t *testing.T) {
	srv, _, _ := limited(t, Limits{})
	form := url.Values{"csrf": {"x"}, "token": {strings.Repeat("a", 10<<20)}}.Encode()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", srv.URL+"/console/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: "sparecap_login", Value: "x"})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // the server may close before the client has sent it all
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("10 MB sign-in: %s", resp.Status)
			}
		})
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 16<<20 {
		t.Errorf("four 10 MB sign-ins allocated %d MB", grew>>20)
	}
	// Chunked (no length): cut where it passes the cap.
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/admin/projects/team/tokens"},
		{"POST", "/v1/clusters"},
		{"POST", "/console/login"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, io.MultiReader(strings.NewReader(`{"x":"`), strings.NewReader(strings.Repeat("a", 2<<20))))
		req.Header.Set("Authorization", "Bearer "+testAdmin)
		if strings.HasPrefix(tc.path, "/console/") {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with 2 MB: %s %s", tc.method, tc.path, resp.Status, body)
		}
		if strings.HasPrefix(tc.path, "/v1/") && !strings.Contains(string(body), `"code":"`+apiv1.CodeTooLarge+`"`) {
			t.Errorf("%s %s: 413 without the API's error shape: %s", tc.method, tc.path, body)
		}
	}
}

// TestRateLimits: requests beyond a token's rate get 429 with
// Retry-After; an address that used up its failed authentications is
// refused even with a good token, and each failure is logged with the
// client address, never the token.
func TestRateLimits(t *testing.T) {
	srv, token, logs := limited(t, Limits{TokenRate: 1, AuthFailures: 3})
	get := func(tok string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	codes := []int{get(token).StatusCode, get(token).StatusCode}
	third := get(token)
	if codes[0] != 200 || codes[1] != 200 || third.StatusCode != 429 || third.Header.Get("Retry-After") == "" {
		t.Fatalf("burst of 2 at 1/s: %v then %s (Retry-After %q)", codes, third.Status, third.Header.Get("Retry-After"))
	}
	if get(testAdmin).StatusCode != 200 {
		t.Fatal("another token shares the first one's limit")
	}
	guess := "sc_guess_" + strings.Repeat("z", 40)
	for i := range 3 {
		if code := get(guess).StatusCode; code != 401 {
			t.Fatalf("failed attempt %d: %d, want 401", i+1, code)
		}
	}
	for _, tok := range []string{guess, testAdmin} {
		if resp := get(tok); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("after 3 failures, a request got %s, want 429 with Retry-After", resp.Status)
		}
	}
	log := logs.String()
	if n := strings.Count(log, "authentication failed"); n != 3 || !strings.Contains(log, "client=127.0.0.1") {
		t.Errorf("%d failed authentications logged, want 3 with the client address:\n%s", n, log)
	}
	if strings.Contains(log, guess) || strings.Contains(log, "zzzz") {
		t.Errorf("the log holds the token:\n%s", log)
	}
}

// TestLongTokensAreRefused: a bearer token longer than any the server
// issues is refused without being looked up.
func TestLongTokensAreRefused(t *testing.T) {
	srv, _, _ := limited(t, Limits{})
	req, _ := http.NewRequest("GET", srv.URL+"/v1/clusters", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("t", 4000))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), "longer than") {
		t.Fatalf("a 4000-character token: %s %s", resp.Status, body)
	}
}

// TestStreamsAreCapped: a project may hold only so many event streams
// open; closing one makes room.
func TestStreamsAreCapped(t *testing.T) {
	srv, token, _ := limited(t, Limits{MaxStreamsPerProject: 2})
	ctx := context.Background()
	cl, err := client.New(srv.URL, token).CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "a", Region: "us-central-2", GPUType: "RTX_6000_PCI", NumGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/clusters/"+cl.ClusterID+"/events?watch=true", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	a, closeA := open()
	b, closeB := open()
	defer closeB()
	c, closeC := open()
	closeC()
	if a.StatusCode != 200 || b.StatusCode != 200 || c.StatusCode != 429 {
		t.Fatalf("streams: %s, %s, then %s; want 200, 200, 429", a.Status, b.Status, c.Status)
	}
	closeA()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, closeD := open()
		closeD()
		if d.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream still counts: %s", d.Status)
		}
	}
}

// TestConnectionCap: a connection beyond the cap is answered at once
// (503) and closed, and holds no place: once a served one closes, the
// next is served.
func TestConnectionCap(t *testing.T) {
	srv, _, _ := limited(t, Limits{MaxConnections: 2, MaxConnectionsPerAddress: 3})
	a, _ := servedPair(t, srv)
	third := dial(t, srv)
	resp, body, err := ask(third, "/v1/clusters")
	if err != nil || resp.StatusCode != 503 || !strings.Contains(body, "--max-connections") {
		t.Fatalf("a third connection with a cap of 2: %v %s %v", resp, body, err)
	}
	closedWithin(t, "the refused connection", third, 3*time.Second)
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, _, err := ask(dial(t, srv), "/v1/clusters")
		if err == nil && resp.StatusCode == 401 {
			break // served: it asks for a token
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection after one closed: %v %v", resp, err)
		}
	}
}

// servedPair opens two connections from 127.0.0.1 the server serves.
func servedPair(t *testing.T, srv *Server) (net.Conn, net.Conn) {
	t.Helper()
	cs := servedConns(t, srv, "127.0.0.1", 2)
	return cs[0], cs[1]
}

// servedConns opens n connections from src that the server serves (it
// answers 401 to a request without a token, not 503 or 429), once the
// set-up's kept-alive connections are closed on both ends: until the
// server has seen them close they hold places.
func servedConns(t *testing.T, srv *Server, src string, n int) []net.Conn {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var cs []net.Conn
		var last error
		for range n {
			c := dialFrom(t, srv, src)
			cs = append(cs, c)
			if resp, _, err := ask(c, "/v1/clusters"); err != nil || resp.StatusCode != 401 {
				last = fmt.Errorf("%v %v", resp, err)
				break
			}
		}
		if last == nil {
			return cs
		}
		for _, c := range cs {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections from %s are not served: %v", n, src, last)
		}
	}
}

// TestMetricsListener: --metrics-addr moves /metrics off the API's
// listener, and a metrics token is asked of every scrape wherever
// /metrics is served.
func TestMetricsListener(t *testing.T) {
	const token = "metrics-0123456789abcdef0123456789abcdef"
	scrape := func(url, tok string) (int, string) {
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	start := func(o Options) *Server {
		dir := t.TempDir()
		o.Addr, o.DataDir, o.AdminToken, o.ConfigPath = "127.0.0.1:0", dir, testAdmin, filepath.Join(dir, "cli.yaml")
		srv, err := Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		return srv
	}
	srv := start(Options{MetricsAddr: "127.0.0.1:0", MetricsToken: token})
	if srv.MetricsURL == srv.URL {
		t.Fatal("metrics share the API's listener")
	}
	if code, _ := scrape(srv.URL, token); code != 404 {
		t.Errorf("/metrics on the API's listener: %d, want 404", code)
	}
	if code, body := scrape(srv.MetricsURL, ""); code != 401 || !strings.Contains(body, apiv1.CodeUnauthorized) {
		t.Errorf("/metrics without the token: %d %s", code, body)
	}
	if code, _ := scrape(srv.MetricsURL, testAdmin); code != 401 {
		t.Errorf("/metrics with another token: %d", code)
	}
	if code, body := scrape(srv.MetricsURL, token); code != 200 || !strings.Contains(body, "sparecap_nodes") {
		t.Errorf("/metrics with its token: %d", code)
	}
	// The leader's first retention pass reads every table's size.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body := scrape(srv.MetricsURL, token)
		if strings.Contains(body, `sparecap_table_bytes{table="nodes"}`) && strings.Contains(body, `sparecap_table_rows{table="machines"}`) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no table sizes in /metrics 10 s after the start")
		}
	}
	one := start(Options{MetricsToken: token})
	if code, _ := scrape(one.URL, ""); code != 401 {
		t.Errorf("/metrics on the API's listener without the token: %d", code)
	}
	if code, _ := scrape(one.URL, token); code != 200 {
		t.Errorf("/metrics on the API's listener with the token: %d", code)
	}
}
