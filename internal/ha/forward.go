package ha

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// ForwardedHeader marks a request one server forwarded to another: the
// receiver serves it or refuses it, never forwards it again.
const ForwardedHeader = "X-Sparecap-Forwarded-By"

// Forwarder serves what any server may serve (reads) itself and forwards
// every write to the leader, so all changes to the planning state go
// through the one controller that holds it. Without a known leader it
// answers 503 with Retry-After, having changed nothing.
type Forwarder struct {
	Elector *Elector
	// Next serves requests on this server.
	Next http.Handler
	// Auth returns the Authorization header to forward (a console
	// session's token becomes a bearer header: sessions live per server).
	Auth func(*http.Request) (string, error)
	// Transport to the leader (default: http.DefaultTransport).
	Transport http.RoundTripper
	// LeaderReads, if set, picks the reads the leader answers best (usage,
	// which it meters to the second): they are forwarded while a leader
	// is known and served here, from what is stored, while none is or it
	// does not answer.
	LeaderReads func(*http.Request) bool
}

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	read := false
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if f.LeaderReads == nil || !f.LeaderReads(r) {
			f.Next.ServeHTTP(w, r)
			return
		}
		read = true
	}
	if f.Elector.Epoch() >= 0 {
		f.Next.ServeHTTP(w, r)
		return
	}
	if r.Header.Get(ForwardedHeader) != "" {
		if read {
			f.Next.ServeHTTP(w, r)
			return
		}
		unavailable(w, "this server was leader when the request was forwarded to it and is not any more; retry")
		return
	}
	lctx, cancel := context.WithTimeout(r.Context(), leaseReadTimeout)
	addr, ok := f.Elector.LeaderNow(lctx)
	cancel()
	if !ok || addr == "" {
		if read {
			f.Next.ServeHTTP(w, r)
			return
		}
		unavailable(w, "no leader is elected right now (one is normally within a few seconds); nothing was changed: retry")
		return
	}
	target, err := url.Parse(addr)
	if err != nil {
		unavailable(w, "the leader's address is not a URL: "+addr)
		return
	}
	auth := r.Header.Get("Authorization")
	if f.Auth != nil {
		if auth, err = f.Auth(r); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(apiv1.Error{Error: apiv1.ErrorBody{Code: apiv1.CodeUnauthorized, Message: err.Error()}})
			return
		}
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Cookie")
			if auth != "" {
				pr.Out.Header.Set("Authorization", auth)
			}
			pr.Out.Header.Set(ForwardedHeader, f.Elector.Holder())
			// The chain a proxy in front of this server sent goes on,
			// this server's peer appended: the leader, trusting the
			// replicas (--trusted-proxies), counts the client's address
			// for its limits, not this server's.
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
		},
		Transport: f.Transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if read {
				// Nothing was written before the leader answered: serve
				// the request as it came in (its own cookie and headers).
				f.Next.ServeHTTP(w, r)
				return
			}
			// The leader may have died mid-request: the change may or may
			// not have been made. Say so rather than guess.
			// Its error names the leader's address: the log has it.
			f.Elector.cfg.Log.Warn("the leader did not answer a forwarded request", "method", r.Method, "path", r.URL.Path, "err", err)
			unavailable(w, "the leader did not answer; the change may or may not have been made: check, then retry")
		},
	}
	p.ServeHTTP(w, r)
}

func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(apiv1.Error{Error: apiv1.ErrorBody{Code: apiv1.CodeUnavailable, Message: msg}})
}

// leaseReadTimeout bounds the lease read of a follower that has not seen
// a live lease lately, before it refuses a write.
const leaseReadTimeout = 2 * time.Second

// forwardTimeout bounds a forwarded request's wait for the leader's
// response headers.
const forwardTimeout = 30 * time.Second

// NewTransport returns the transport a Forwarder uses by default.
func NewTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = forwardTimeout
	return t
}
