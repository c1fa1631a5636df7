package guard

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeNow is a settable clock for a Limiter.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func TestLimiter(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiter(2, 4) // 2 a second, 4 at once
	l.now = clk.now
	for i := range 4 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of a burst of 4 refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("fifth request: allowed %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key shares a's bucket")
	}
	if ok, _ := l.Ready("a"); ok {
		t.Fatal("an empty bucket is ready")
	}
	clk.t = clk.t.Add(500 * time.Millisecond)
	if ok, _ := l.Ready("a"); !ok {
		t.Fatal("a bucket is not ready after its wait")
	}
	if ok, _ := l.Ready("a"); !ok {
		t.Fatal("Ready took a request")
	}
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("a refilled bucket refused")
	}
	// Idle buckets are forgotten: a flood of keys does not stay.
	for i := range 1000 {
		l.Allow(fmt.Sprint("k", i))
	}
	clk.t = clk.t.Add(time.Hour)
	l.Allow("late")
	if n := l.Len(); n != 1 {
		t.Fatalf("%d buckets kept after an idle hour, want 1", n)
	}
	var none *Limiter
	if ok, _ := none.Allow("x"); !ok {
		t.Fatal("no limiter refused")
	}
	if NewLimiter(0, 10) != nil {
		t.Fatal("a rate of 0 is a limit")
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", 10 * time.Millisecond: "1", 1500 * time.Millisecond: "2", 6 * time.Second: "6"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestAddrs(t *testing.T) {
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", " 192.0.2.1 "})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/33"}); err == nil {
		t.Fatal("a bad prefix parsed")
	}
	if _, err := ParsePrefixes([]string{"proxy.local"}); err == nil {
		t.Fatal("a name parsed")
	}
	a := Addrs{Trusted: trusted}
	for _, tc := range []struct{ remote, xff, want string }{
		{"203.0.113.5:4000", "", "203.0.113.5"},
		{"203.0.113.5:4000", "198.51.100.7", "203.0.113.5"}, // not a trusted peer: the header is ignored
		{"10.1.2.3:4000", "198.51.100.7", "198.51.100.7"},
		{"10.1.2.3:4000", "1.1.1.1, 198.51.100.7, 10.9.9.9", "198.51.100.7"}, // the last untrusted hop
		{"192.0.2.1:4000", "", "192.0.2.1"},
		{"10.1.2.3:4000", "garbage", "10.1.2.3"},
		{"[::ffff:10.1.2.3]:4000", "198.51.100.8", "198.51.100.8"},
		{"[2001:db8::1]:443", "", "2001:db8::1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := a.Of(r); got != tc.want {
			t.Errorf("remote %s, X-Forwarded-For %q: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
		if got := a.Of(r.WithContext(WithClient(r.Context(), "192.0.2.99"))); got != "192.0.2.99" {
			t.Errorf("the context's client address is not used: %s", got)
		}
	}
}

func TestHandler(t *testing.T) {
	var seen []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		seen = append(seen, Addrs{}.Of(r)+" "+string(b))
	})
	var rejected []string
	h := Handler(next, Options{
		MaxBody: 10,
		MaxBodyFor: func(r *http.Request) int64 {
			return map[bool]int64{true: 4, false: 10}[strings.HasPrefix(r.URL.Path, "/small")]
		},
		PerAddress: NewLimiter(1, 2),
		Exempt:     func(r *http.Request) bool { return r.URL.Path == "/healthz" },
		Reject: func(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
			rejected = append(rejected, code)
			w.WriteHeader(status)
		},
	})
	do := func(path, body, remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("/x", "hello", "198.51.100.1:1"); w.Code != 200 || seen[0] != "198.51.100.1 hello" {
		t.Fatalf("%d %v", w.Code, seen)
	}
	if w := do("/x", "this is too long", "198.51.100.2:1"); w.Code != 413 || w.Header().Get("Connection") != "close" {
		t.Fatalf("a body over the cap: %d %v", w.Code, w.Header())
	}
	if w := do("/small", "hello", "198.51.100.3:1"); w.Code != 413 {
		t.Fatalf("a body over a smaller cap: %d", w.Code)
	}
	// A body without a length is cut where it passes the cap.
	r := httptest.NewRequest("POST", "/x", io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("abc")))
	r.ContentLength, r.RemoteAddr = -1, "198.51.100.4:1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Fatalf("an unsized body over the cap: %d", w.Code)
	}
	// Two at once per address, then 429 with Retry-After; probes pass.
	do("/x", "", "198.51.100.9:1")
	do("/x", "", "198.51.100.9:2")
	if w := do("/x", "", "198.51.100.9:3"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("third request in a burst of 2: %d %v", w.Code, w.Header())
	}
	if w := do("/healthz", "", "198.51.100.9:3"); w.Code != 200 {
		t.Fatalf("a probe was limited: %d", w.Code)
	}
	if strings.Join(rejected, ",") != "too_large,too_large,rate_limited" {
		t.Fatalf("rejections %v", rejected)
	}
}
