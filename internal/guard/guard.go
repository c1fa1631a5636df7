// Package guard keeps one client from taking what a server has: it caps
// request bodies, rate-limits by client address and by token (a token
// bucket per key, forgotten once idle), and works out a request's client
// address, behind trusted proxies too. The API and the console share it;
// the HTTP server's own timeouts and connection cap are set where it
// listens (package server).
package guard

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// Limiter is a token bucket per key: Rate requests a second, up to Burst
// at once. A nil Limiter allows everything. Buckets not used for a while
// are dropped, so a flood of keys (addresses, guessed tokens) does not
// grow it without bound.
type Limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

// NewLimiter returns a limiter of perSecond requests a second with bursts
// of burst, or nil (no limit) when perSecond is not positive.
func NewLimiter(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	return &Limiter{rate: rate.Limit(perSecond), burst: max(burst, 1), now: time.Now, buckets: map[string]*bucket{}}
}

// idle is how long a bucket is kept unused: long enough to be full again.
func (l *Limiter) idle() time.Duration {
	return max(time.Minute, time.Duration(float64(l.burst)/float64(l.rate)*float64(time.Second)))
}

func (l *Limiter) get(key string, now time.Time) *rate.Limiter {
	if now.Sub(l.lastSweep) > l.idle() {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > l.idle() {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{l: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	return b.l
}

// Allow takes one request from key's bucket. When the bucket is empty it
// answers false and how long until the next request would be allowed.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.get(key, now)
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, wait(b, now)
}

// Ready reports whether key's bucket has a request left, without taking
// it, and if not how long until it has.
func (l *Limiter) Ready(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.get(key, now)
	if b.TokensAt(now) >= 1 {
		return true, 0
	}
	return false, wait(b, now)
}

func wait(b *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - b.TokensAt(now)
	return time.Duration(missing / float64(b.Limit()) * float64(time.Second))
}

// Len is how many keys the limiter holds a bucket for.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// RetryAfter is the Retry-After header's value for a wait: whole seconds,
// rounded up, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// Addrs works out a request's client address: the connection's peer, or,
// when the peer is a trusted proxy, the address that proxy says it
// forwarded for (the last entry of X-Forwarded-For that is not itself a
// trusted proxy).
type Addrs struct {
	Trusted []netip.Prefix
}

// ParsePrefixes parses a list of CIDR prefixes or single addresses.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix", s)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// IsTrusted reports whether ip is a trusted proxy's.
func (a Addrs) IsTrusted(ip netip.Addr) bool {
	for _, p := range a.Trusted {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// Of returns r's client address (an IP address, without port).
func (a Addrs) Of(r *http.Request) string {
	if v, ok := r.Context().Value(clientKey{}).(string); ok {
		return v
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !a.IsTrusted(ip) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !a.IsTrusted(hop) {
			return hop.Unmap().String()
		}
		ip = hop
	}
	return ip.Unmap().String()
}

type clientKey struct{}

// WithClient returns ctx carrying the client address addr: requests made
// on a client's behalf in the same process (the console's calls to the
// API) are counted against that client.
func WithClient(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// Reject writes a refusal; the API writes its JSON error shape.
type Reject func(w http.ResponseWriter, r *http.Request, status int, code, msg string)

// Options configure Handler.
type Options struct {
	Addrs Addrs
	// MaxBody bounds request bodies; MaxBodyFor, if set, picks another
	// bound for some requests (the console's forms).
	MaxBody    int64
	MaxBodyFor func(r *http.Request) int64
	// PerAddress limits requests per client address; Exempt requests
	// (health probes) are not counted.
	PerAddress *Limiter
	Exempt     func(r *http.Request) bool
	Reject     Reject
}

// Handler puts the guards in front of next: the client address in the
// request's context (see WithClient), the per-address rate limit (429 with
// Retry-After) and the body cap (413, at once when Content-Length says so,
// else when the handler reads past it).
func Handler(next http.Handler, o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := o.Addrs.Of(r)
		r = r.WithContext(WithClient(r.Context(), addr))
		if o.Exempt == nil || !o.Exempt(r) {
			if ok, wait := o.PerAddress.Allow(addr); !ok {
				w.Header().Set("Retry-After", RetryAfter(wait))
				o.Reject(w, r, http.StatusTooManyRequests, apiv1.CodeRateLimited,
					fmt.Sprintf("too many requests from %s; retry in %s s", addr, RetryAfter(wait)))
				return
			}
		}
		limit := o.MaxBody
		if o.MaxBodyFor != nil {
			limit = o.MaxBodyFor(r)
		}
		if limit > 0 {
			if r.ContentLength > limit {
				// Refused without reading it: the connection closes rather
				// than drain a body nobody wants.
				w.Header().Set("Connection", "close")
				o.Reject(w, r, http.StatusRequestEntityTooLarge, apiv1.CodeTooLarge,
					fmt.Sprintf("request body of %d bytes is larger than the %d allowed", r.ContentLength, limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
