package server

// The server's listeners: the API's, with its connection limits, and the
// side ones for metrics and profiling.

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"golang.org/x/net/netutil"

	"github.com/sparecap/sparecap/internal/guard"
)

// listen opens the API's listener: its address is the server's URL.
func (b *boot) listen() error {
	o, s := b.o, b.s
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	trusted, err := guard.ParsePrefixes(o.Limits.TrustedProxies)
	if err != nil {
		ln.Close()
		return fmt.Errorf("trusted proxies: %w", err)
	}
	most := cmp.Or(o.Limits.MaxConnections, DefaultMaxConnections)
	b.conns = guard.ConnLimits{Max: most, PerAddress: cmp.Or(o.Limits.MaxConnectionsPerAddress, max(most/8, 1)),
		Overflow: overflowConnections, Exempt: guard.Addrs{Trusted: trusted}.IsTrusted, Clock: o.Clock}
	s.ln = guard.Listen(ln, b.conns)
	s.URL = "http://" + s.ln.Addr().String()
	return nil
}

// httpServer writes the CLI's config and builds the API's HTTP server.
func (b *boot) httpServer() error {
	o, s := b.o, b.s
	if o.ConfigPath != "" {
		if err := writeClientConfig(o.ConfigPath, s.URL, s.AdminToken); err != nil {
			return err
		}
	}
	lim := o.Limits
	s.http = &http.Server{Handler: b.served, ConnContext: guard.ConnContext, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:    cmp.Or(lim.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:   cmp.Or(lim.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:    cmp.Or(lim.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes: 64 << 10,
	}
	return nil
}

// sideListeners serve /metrics (with --metrics-addr) and the profiling
// endpoints (with --pprof-addr) on listeners of their own.
func (b *boot) sideListeners() error {
	o, s := b.o, b.s
	s.MetricsURL = s.URL
	if o.MetricsAddr != "" {
		mln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on %s for metrics: %w", o.MetricsAddr, err)
		}
		s.MetricsURL = "http://" + mln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", b.metrics)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: DefaultReadTimeout,
			WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout}
		b.side = append(b.side, srv)
		go srv.Serve(netutil.LimitListener(mln, 64))
	}
	if o.PprofAddr != "" {
		pln, err := net.Listen("tcp", o.PprofAddr)
		if err != nil {
			return fmt.Errorf("listen on %s for profiling: %w", o.PprofAddr, err)
		}
		s.PprofURL = "http://" + pln.Addr().String()
		// Where the plan lock and the store's write lock are waited for
		// (/debug/pprof/mutex): one contended unlock in ten is sampled.
		runtime.SetMutexProfileFraction(10)
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		b.side = append(b.side, srv)
		go srv.Serve(pln)
	}
	return nil
}
