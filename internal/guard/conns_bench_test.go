package guard

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"golang.org/x/net/netutil"
)

// BenchmarkConnChurn measures what sharing a listener's connections costs
// a client that opens a connection per request (the worst case for the
// listener: every request is an accept and a close): guard.Listen with its
// ConnContext and ConnHandler against the plain netutil.LimitListener the
// server used before, side by side, 8 clients on loopback.
func BenchmarkConnChurn(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	limits := ConnLimits{Max: 1024, PerAddress: 128, Overflow: 64}
	reject := func(w http.ResponseWriter, r *http.Request, code int, _, msg string) { http.Error(w, msg, code) }
	cases := []struct {
		name  string
		serve func(net.Listener) *http.Server
	}{
		{"limit-listener", func(ln net.Listener) *http.Server {
			srv := &http.Server{Handler: ok}
			go srv.Serve(netutil.LimitListener(ln, limits.Max))
			return srv
		}},
		{"guard", func(ln net.Listener) *http.Server {
			srv := &http.Server{Handler: ConnHandler(ok, func(*http.Request) bool { return false }, reject, limits), ConnContext: ConnContext}
			go srv.Serve(Listen(ln, limits))
			return srv
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := c.serve(ln)
			defer srv.Close()
			url := "http://" + ln.Addr().String() + "/"
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			var failed atomic.Int64
			b.SetParallelism(4) // 8 clients on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						failed.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d requests failed", n, b.N)
			}
		})
	}
}
