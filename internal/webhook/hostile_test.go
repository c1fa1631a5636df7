package webhook

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// rawReceiver is an endpoint that answers every request with the bytes
// answer writes, whatever HTTP allows: a hostile receiver.
func rawReceiver(t *testing.T, answer func(w io.Writer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				bw := bufio.NewWriter(c)
				answer(bw)
				_ = bw.Flush()
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook"
}

// TestHugeAnswersAreCut: an endpoint that answers with 5 MiB in its
// Location, its status text, a header or its body (or with escape
// sequences) cannot make the delivery's stored error larger than a few
// KiB, nor put control characters in it.
func TestHugeAnswersAreCut(t *testing.T) {
	f := newFixture(t, nil)
	huge := strings.Repeat("A", 5<<20)
	answers := map[string]func(w io.Writer){
		"location": func(w io.Writer) {
			fmt.Fprintf(w, "HTTP/1.1 302 Found\r\nLocation: http://x/%s\r\nContent-Length: 0\r\n\r\n", huge)
		},
		"status text": func(w io.Writer) {
			fmt.Fprintf(w, "HTTP/1.1 500 %s\r\nContent-Length: 0\r\n\r\n", huge)
		},
		"header": func(w io.Writer) {
			fmt.Fprintf(w, "HTTP/1.1 500 Oops\r\nX-Junk: %s\r\nContent-Length: 0\r\n\r\n", huge)
		},
		"body": func(w io.Writer) {
			fmt.Fprintf(w, "HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n%s", len(huge), huge)
		},
		"escapes": func(w io.Writer) {
			body := "\x1b]0;owned\x07\x1b[2J\u202eevil"
			fmt.Fprintf(w, "HTTP/1.1 503 Busy\x1b[31m\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		},
	}
	eps := map[string]domain.WebhookEndpoint{}
	for name, answer := range answers {
		eps[name], _ = f.endpoint("p", rawReceiver(t, answer), nil)
	}
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step()
	for name, ep := range eps {
		ds := f.deliveries(ep.ID)
		if len(ds) != 1 {
			t.Fatalf("%s: %d deliveries", name, len(ds))
		}
		d := ds[0]
		if d.State != domain.DeliveryPending || d.Attempts != 1 || d.LastError == "" {
			t.Errorf("%s: %+v; want a failed attempt, pending a retry", name, d)
		}
		if len(d.LastError) > 1024 {
			t.Errorf("%s: the stored error is %d bytes: %.100s…", name, len(d.LastError), d.LastError)
		}
		if strings.ContainsAny(d.LastError, "\x1b\x07\u202e") {
			t.Errorf("%s: control characters stored: %q", name, d.LastError)
		}
	}
}

// TestWorkListIsBounded: a cluster whose API lists thousands of pods with
// long names on one node cannot make a notice's message (stored once per
// event) grow with them: the list is cut, and says how many were left
// out.
func TestWorkListIsBounded(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, nil)
	f.endpoint("p", r.URL, nil)
	var ws []driver.Work
	for i := range 5000 {
		ws = append(ws, driver.Work{Namespace: "ns", Name: fmt.Sprintf("pod-%d-%s", i, strings.Repeat("x", 5000)), UID: "u"})
	}
	f.drv.work["c-k/gpu-1"] = ws
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(5*time.Minute))
	f.step()
	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	if len(got[0].body) > 64<<10 {
		t.Errorf("the notice is %d bytes", len(got[0].body))
	}
	_, data := decode(t, got[0].body)
	if data.Work == nil || data.Work.Pods == nil || len(*data.Work.Pods) == 0 || len(*data.Work.Pods)+data.Work.More != 5000 {
		t.Fatalf("work: %+v", data.Work)
	}
	for _, p := range *data.Work.Pods {
		if len(p.Name) > 256 {
			t.Fatalf("a pod name of %d bytes", len(p.Name))
		}
	}
}

// TestAttemptErrorsNameNoAddress: what a failed attempt records says
// refused, unreachable or did not resolve, never the address a name
// resolved to nor the resolver's (the tenant reads it).
func TestAttemptErrorsNameNoAddress(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://hooks.example.com/x",
			Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.9.8.7"), Port: 80}, Err: err}}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{dial(fmt.Errorf("%w: 10.9.8.7 is a private address", ErrRefusedAddress)), "refused by the server's address policy"},
		{dial(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "connection refused"},
		{dial(&os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}), "unreachable"},
		{dial(&net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: "10.0.0.53:53", IsNotFound: true}), "does not resolve"},
		{dial(&net.DNSError{Err: "server misbehaving", Name: "hooks.example.com", Server: "10.0.0.53:53"}), "could not be resolved"},
		{&url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.ParseIP("10.1.1.1")},
			Addr: &net.TCPAddr{IP: net.ParseIP("10.9.8.7"), Port: 80}, Err: syscall.ECONNRESET}}, "closed"},
		{&url.Error{Op: "Post", URL: "u", Err: io.EOF}, "closed"},
	} {
		got := attemptError(c.err, context.Background(), time.Second)
		if !strings.Contains(got, c.want) {
			t.Errorf("%v: %q; want it to say %q", c.err, got, c.want)
		}
		if strings.Contains(got, "10.") {
			t.Errorf("%v: %q names an address", c.err, got)
		}
	}
}

// TestBacklogPerEndpointIsCapped: an endpoint that never succeeds holds
// at most MaxPending deliveries pending; the events beyond are recorded
// at once as failed, saying why, so the tenant sees what was not sent
// and the store does not grow with the endpoint's outage. Another
// endpoint of the same events is not held back.
func TestBacklogPerEndpointIsCapped(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPending = 3 })
	down := newReceiver(t, func(int) (int, time.Duration) { return 500, 0 })
	up := newReceiver(t, nil)
	dead, _ := f.endpoint("p", down.URL, nil)
	live, _ := f.endpoint("p", up.URL, nil)
	for i := range 5 {
		f.event("c-k", fmt.Sprintf("gpu-%d", i), domain.ReasonNodeAdded, time.Time{})
		f.step()
	}
	var pending, failed int
	for _, d := range f.deliveries(dead.ID) {
		switch d.State {
		case domain.DeliveryPending:
			pending++
		case domain.DeliveryFailed:
			failed++
			if d.Attempts != 0 || !strings.Contains(d.LastError, "not sent") || !strings.Contains(d.LastError, "3 deliveries pending") {
				t.Errorf("a delivery beyond the backlog: %+v", d)
			}
		}
	}
	if pending != 3 || failed != 2 {
		t.Errorf("the failing endpoint: %d pending, %d failed; want 3 and 2", pending, failed)
	}
	if n := len(up.requests()); n != 5 {
		t.Errorf("the healthy endpoint got %d of 5", n)
	}
	for _, d := range f.deliveries(live.ID) {
		if d.State != domain.DeliveryDelivered {
			t.Errorf("healthy endpoint: %+v", d)
		}
	}
}
