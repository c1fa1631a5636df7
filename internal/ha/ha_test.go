package ha

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func fast(holder, addr string) Config {
	return Config{Holder: holder, Address: addr, TTL: 300 * time.Millisecond, Renew: 50 * time.Millisecond, Retry: 20 * time.Millisecond}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOneLeaderAndHandover: of two electors one leads at a time; when the
// leader stops, the other takes over with a later epoch, and the first
// term's context ended before the second began.
func TestOneLeaderAndHandover(t *testing.T) {
	st := openStore(t)
	var mu sync.Mutex
	running := map[string]int64{}
	overlap := false
	term := func(name string) func(context.Context, int64) {
		return func(ctx context.Context, epoch int64) {
			mu.Lock()
			if len(running) > 0 {
				overlap = true
			}
			running[name] = epoch
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			delete(running, name)
			mu.Unlock()
		}
	}
	a, b := NewElector(st, fast("a", "http://a")), NewElector(st, fast("b", "http://b"))
	actx, stopA := context.WithCancel(t.Context())
	aDone := make(chan struct{})
	go func() { a.Run(actx, term("a")); close(aDone) }()
	eventually(t, "a leads", func() bool { return a.Epoch() > 0 })
	bDone := make(chan struct{})
	go func() { b.Run(t.Context(), term("b")); close(bDone) }()
	eventually(t, "b sees a as leader", func() bool { addr, ok := b.Leader(); return ok && addr == "http://a" })
	if b.Epoch() >= 0 {
		t.Fatal("b leads while a holds the lease")
	}
	first := a.Epoch()
	stopA()
	<-aDone
	eventually(t, "b takes over", func() bool { return b.Epoch() > first })
	// The elector sets its epoch just before it starts the term: wait for
	// the term to record itself rather than race it.
	eventually(t, "b's term runs with b's epoch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["b"] == b.Epoch()
	})
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("two terms ran at once")
	}
}

// TestLostLeaseEndsTerm: a leader whose lease another server took (as
// after a pause) ends its term at its next renewal.
func TestLostLeaseEndsTerm(t *testing.T) {
	st := openStore(t)
	a := NewElector(st, fast("a", ""))
	ended := make(chan int64, 1)
	go a.Run(t.Context(), func(ctx context.Context, epoch int64) { <-ctx.Done(); ended <- epoch })
	eventually(t, "a leads", func() bool { return a.Epoch() > 0 })
	epoch := a.Epoch()
	// Someone releases a's lease behind its back and takes it.
	if err := st.ReleaseLease(t.Context(), "a", epoch); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.AcquireLease(t.Context(), "intruder", "", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	select {
	case got := <-ended:
		if got != epoch {
			t.Fatalf("ended term %d, want %d", got, epoch)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a's term did not end after its lease was taken")
	}
	if a.Epoch() >= 0 {
		t.Fatalf("a still leads (epoch %d)", a.Epoch())
	}
}

// TestForwarder: a follower serves reads itself and forwards writes, with
// their bearer, to the leader; without a leader a write gets a 503 and
// reaches nobody.
func TestForwarder(t *testing.T) {
	st := openStore(t)
	var leaderGot []string
	var mu sync.Mutex
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaderGot = append(leaderGot, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get(ForwardedHeader)+
			" for "+r.Header.Get("X-Forwarded-For"))
		mu.Unlock()
		io.WriteString(w, "leader")
	}))
	defer leader.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local") })
	f := NewElector(st, fast("f", "http://f"))
	fw := &Forwarder{Elector: f, Next: local, LeaderReads: func(r *http.Request) bool { return r.URL.Path == "/v1/usage" }}
	do := func(method string) (int, string) { return doPath(fw, method, "/v1/clusters") }
	if code, body := do("POST"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
		t.Fatalf("a write with no leader: %d %s", code, body)
	}
	if code, body := do("GET"); code != 200 || body != "local" {
		t.Fatalf("a read on a follower: %d %s", code, body)
	}
	if code, body := doPath(fw, "GET", "/v1/usage"); code != 200 || body != "local" {
		t.Fatalf("a leader read with no leader is served from what is stored: %d %s", code, body)
	}
	if _, ok, err := st.AcquireLease(t.Context(), "l", leader.URL, time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	go f.Run(t.Context(), func(ctx context.Context, _ int64) { t.Error("the follower led") })
	eventually(t, "the follower sees the leader", func() bool { _, ok := f.Leader(); return ok })
	if code, body := do("POST"); code != 200 || body != "leader" {
		t.Fatalf("a forwarded write: %d %s", code, body)
	}
	if code, body := doPath(fw, "GET", "/v1/usage"); code != 200 || body != "leader" {
		t.Fatalf("a leader read with a leader: %d %s", code, body)
	}
	if code, body := do("GET"); code != 200 || body != "local" {
		t.Fatalf("a read with a leader: %d %s", code, body)
	}
	mu.Lock()
	got := strings.Join(leaderGot, "\n")
	mu.Unlock()
	// The client's address goes with it, after those a proxy in front
	// of the follower named: the leader's limits count the client, not
	// the follower.
	if got != "POST /v1/clusters Bearer tok f for 203.0.113.9, 192.0.2.1\nGET /v1/usage Bearer tok f for 203.0.113.9, 192.0.2.1" {
		t.Fatalf("the leader got %q", got)
	}
	// A forwarded request is never forwarded again.
	req := httptest.NewRequest("POST", "/v1/clusters", nil)
	req.Header.Set(ForwardedHeader, "x")
	rec := httptest.NewRecorder()
	fw.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a twice-forwarded write: %d", rec.Code)
	}
	// A dead leader: 503 that says the outcome is unknown; a leader read
	// is served here.
	leader.Close()
	if code, body := do("DELETE"); code != http.StatusServiceUnavailable || !strings.Contains(body, "may or may not") ||
		strings.Contains(body, "127.0.0.1") {
		t.Fatalf("a write to a dead leader: %d %s", code, body)
	}
	if code, body := doPath(fw, "GET", "/v1/usage"); code != 200 || body != "local" {
		t.Fatalf("a leader read while the leader does not answer: %d %s", code, body)
	}
}

func doPath(fw *Forwarder, method, path string) (int, string) {
	req := httptest.NewRequest(method, path, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	rec := httptest.NewRecorder()
	fw.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestStalledFollowerAsksTheStore: a follower whose campaign loop has not
// read the lease for longer than the lease lasts (a loaded machine, a slow
// database) still forwards a write to the live leader: it reads the lease
// once more before it refuses. Before, it answered "no leader" while one
// was renewing its lease all along.
func TestStalledFollowerAsksTheStore(t *testing.T) {
	st := openStore(t)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "leader") }))
	defer leader.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local") })
	l, ok, err := st.AcquireLease(t.Context(), "l", leader.URL, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	f := NewElector(st, fast("f", "http://f"))
	// The lease as the follower last read it: long ago, and aged out.
	f.set(-1, store.Lease{Holder: l.Holder, Address: l.Address, Epoch: l.Epoch, Now: l.Now, Expires: l.Now.Add(time.Second)}, time.Now().Add(-time.Minute))
	if _, ok := f.Leader(); ok {
		t.Fatal("the stale lease still counts")
	}
	fw := &Forwarder{Elector: f, Next: local}
	if code, body := doPath(fw, "POST", "/v1/clusters"); code != 200 || body != "leader" {
		t.Fatalf("a write on a stalled follower: %d %s; want it forwarded to the leader", code, body)
	}
	// With no leader at all, it still refuses.
	if err := st.ReleaseLease(t.Context(), "l", l.Epoch); err != nil {
		t.Fatal(err)
	}
	f.set(-1, store.Lease{}, time.Now())
	if code, body := doPath(fw, "POST", "/v1/clusters"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
		t.Fatalf("a write with no leader: %d %s", code, body)
	}
}
