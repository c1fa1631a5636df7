package guard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/clock"
)

// ConnLimits share a listener's connections among clients: none may hold
// more than its share, and health probes are answered when every share
// is taken.
type ConnLimits struct {
	// Max is how many connections are served at once.
	Max int
	// PerAddress is how many of them one client address may hold (an
	// IPv6 client's /64, which one host is usually given whole).
	PerAddress int
	// Exempt addresses are not held to PerAddress: reverse proxies and
	// the other replicas, whose connections carry many clients'.
	Exempt func(netip.Addr) bool
	// Overflow is how many connections beyond those are accepted to be
	// answered at once and closed: /healthz and /readyz are served,
	// anything else refused with a 429 (the address is over its share)
	// or a 503 (the server is full). Beyond Overflow a connection is
	// closed as soon as it is accepted.
	Overflow int
	// Clock times the refused connections' deadlines: socket deadlines
	// are wall time (default clock.Real{}).
	Clock clock.Clock
}

// overflowDeadline bounds how long a refused connection may take to send
// its request and read the answer.
const overflowDeadline = 2 * time.Second

// Listen returns ln with the connections it accepts shared by l. Serve
// it with ConnContext as the http.Server's ConnContext and ConnHandler
// around the handler, so refused connections are answered.
func Listen(ln net.Listener, l ConnLimits) net.Listener {
	if l.Clock == nil {
		l.Clock = clock.Real{}
	}
	return &sharedListener{Listener: ln, l: l, per: map[netip.Addr]int{}}
}

type sharedListener struct {
	net.Listener
	l ConnLimits

	mu       sync.Mutex
	open     int // admitted connections
	overflow int // refused connections not yet closed
	per      map[netip.Addr]int
}

// refusal says why a connection is not served: "" for one that is.
type refusal string

const (
	overShare refusal = "address"
	full      refusal = "full"
)

// Accept admits the next connection, or accepts it refused (see
// ConnLimits.Overflow).
func (s *sharedListener) Accept() (net.Conn, error) {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if conn := s.admit(c); conn != nil {
			return conn, nil
		}
		c.Close() // past the overflow too: not even an answer
	}
}

// admit decides c's fate: an admitted or a refused connection, or nil
// when it should be closed at once.
func (s *sharedListener) admit(c net.Conn) net.Conn {
	key, exempt := s.key(c.RemoteAddr())
	s.mu.Lock()
	defer s.mu.Unlock()
	why := refusal("")
	switch {
	case !exempt && s.l.PerAddress > 0 && s.per[key] >= s.l.PerAddress:
		why = overShare
	case s.open >= s.l.Max:
		why = full
	}
	if why == "" {
		s.open++
		s.per[key]++
		return &sharedConn{Conn: c, release: func() { s.release(key, false) }}
	}
	if s.overflow >= s.l.Overflow {
		return nil
	}
	s.overflow++
	rc := &sharedConn{Conn: c, refused: why, hard: s.l.Clock.Now().Add(overflowDeadline), release: func() { s.release(key, true) }}
	_ = c.SetDeadline(rc.hard)
	return rc
}

// key is the address a connection counts against, and whether it is
// exempt from the per-address share.
func (s *sharedListener) key(a net.Addr) (netip.Addr, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, true // not TCP/IP (a test's pipe): nobody's share
	}
	ip := tcp.AddrPort().Addr().Unmap()
	exempt := s.l.Exempt != nil && s.l.Exempt(ip)
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return ip, exempt
}

func (s *sharedListener) release(key netip.Addr, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if refused {
		s.overflow--
		return
	}
	s.open--
	if s.per[key]--; s.per[key] <= 0 {
		delete(s.per, key)
	}
}

// sharedConn is a connection of a sharedListener. A refused one keeps a
// hard deadline whatever the server sets.
type sharedConn struct {
	net.Conn
	refused refusal
	hard    time.Time
	once    sync.Once
	release func()
}

func (c *sharedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func (c *sharedConn) clamp(t time.Time) time.Time {
	if c.refused == "" || (!t.IsZero() && t.Before(c.hard)) {
		return t
	}
	return c.hard
}

func (c *sharedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *sharedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *sharedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

type refusalKey struct{}

// ConnContext is the http.Server's ConnContext for a Listen listener: it
// tells ConnHandler which connections were refused.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*sharedConn); ok && sc.refused != "" {
		return context.WithValue(ctx, refusalKey{}, sc.refused)
	}
	return ctx
}

// ConnHandler answers the requests of refused connections: health
// probes (health) are served, the rest refused, and the connection is
// closed after the answer.
func ConnHandler(next http.Handler, health func(*http.Request) bool, reject Reject, l ConnLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why, _ := r.Context().Value(refusalKey{}).(refusal)
		if why == "" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if health(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		if why == overShare {
			reject(w, r, http.StatusTooManyRequests, apiv1.CodeRateLimited,
				fmt.Sprintf("your address has %d connections open to this server, the most one address may (--max-connections-per-address); reuse one, or close one first", l.PerAddress))
			return
		}
		reject(w, r, http.StatusServiceUnavailable, apiv1.CodeUnavailable,
			fmt.Sprintf("this server has %d connections open, the most it serves at once (--max-connections); retry", l.Max))
	})
}
