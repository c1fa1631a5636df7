// Package api serves the /v1 REST API: JSON over net/http, bearer-token
// auth, and Server-Sent Events for lifecycle events. It validates requests,
// checks who may see what, and hands changes to the controller; it never
// writes nodes itself.
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/guard"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/store"
)

// Server is the HTTP API.
type Server struct {
	// sims runs the simulations asked for (made on first use, simOnce).
	sims    *simulate.Queue
	simOnce sync.Once
	store   store.Store
	ctrl    *controller.Controller
	clock   clock.Clock
	log     *slog.Logger
	// uses are the token uses not yet written (see FlushTokenUses).
	uses usage
	// wall is the clock of tokens (expiry, last use): people's time, not
	// the simulation's, which may run faster (--speed).
	wall clock.Clock
	// realClock times what is wall time whatever the server's clocks are:
	// socket deadlines, keep-alives, request durations, the flush of token
	// uses. New makes it wall; it is apart so a test can set token time
	// by hand while streams keep real time.
	realClock clock.Clock
	mux       *http.ServeMux
	// KeepAlive is the interval of SSE keep-alive comments.
	KeepAlive time.Duration
	// Meter, if set, cuts usage records before usage is read, so a bill
	// asked for now includes the running nodes up to now.
	Meter interface{ Cut(context.Context) error }
	// Sessions, if set, lets a browser signed in to the console call the
	// API with its session cookie instead of a bearer header (see
	// SessionCookie).
	Sessions Sessions
	// Role, if set, names this server's part (leader or follower) in
	// the /readyz answer; "" while it is starting (not ready).
	Role func() string
	// offers caches what checkOffering works out from the machines.
	offers atomic.Pointer[offerings]
	// lists indexes the in-memory copy for cluster lists.
	lists atomic.Pointer[listIndex]
	// streams counts the open event streams by project (see stream).
	streams streamCounts
	// planSlot lets one plan compute at a time; planners counts the plans
	// running or waiting by project (see planTurn).
	planSlot chan struct{}
	// lendables keeps the pools' lendable history of the hour, which the
	// capacity forecast and the plan options read.
	lendables lendableCache
	planners  streamCounts
	// Options are set after New, before the server handles requests
	// (their fields are promoted: s.Sealer = …, or s.Options = …).
	Options
}

// Options are the optional parts of a Server.
type Options struct {
	// MinLease, if set, is the minimum lease of a machine's pool
	// (fleet.File.Leases): nodes show when theirs ends. Each ready
	// preemptible node's machine is then read for a cluster's view (from
	// memory on the leader, a query each on a follower).
	MinLease func(*domain.Machine) time.Duration
	// Sealer seals the kubeconfigs operators attach to clusters. Without
	// it attaching is refused (503); detaching still works.
	Sealer *secret.Sealer
	// AllowKubeconfigPlugins accepts kubeconfigs with exec credential
	// plugins, auth-providers or proxy-urls, which are refused otherwise:
	// they run commands on this server, with its environment, or send a
	// cluster's traffic elsewhere (kube.CheckKubeconfig).
	AllowKubeconfigPlugins bool
	// OnKubeconfig, if set, is called with a cluster's ID after a
	// kubeconfig was attached to it or detached from it (committed), so
	// that the driver layer reloads that cluster's client. It is called
	// synchronously from the request and must not block for long.
	OnKubeconfig func(clusterID string)
	// CheckAccess, if set, asks the cluster a kubeconfig reaches what
	// its identity may do (kube.CheckKubeconfigAccess) before an attach
	// (or a create with a kubeconfig) stores it: the access record to
	// keep, or an error that refuses the attach.
	CheckAccess func(ctx context.Context, kubeconfig []byte) (domain.Access, error)
	// CheckSlurm, if set, asks the slurmctld a slurm.conf reaches whether
	// it answers, before an attach stores it.
	CheckSlurm func(ctx context.Context, conf []byte) error
	// Addrs works out a request's client address for the failed-sign-in
	// limit and the logs.
	Addrs guard.Addrs
	// PerToken limits the requests of each token; AuthFailures the failed
	// authentications of each client address, which once used up refuse
	// that address every attempt (429) until they refill. Nil: no limit.
	PerToken, AuthFailures *guard.Limiter
	// MaxStreams caps the event streams (watch=true) open at once by one
	// project, whatever its tokens, or one operator token; 0 is no cap.
	MaxStreams int
	// MaxTokens caps a project's active tokens (0: no cap); TokenMints
	// limits how fast a project mints tokens, creating or rotating them
	// (nil: no limit; an operator's mints are not limited).
	MaxTokens  int
	TokenMints *guard.Limiter
	// BudgetWrites limits how fast a project creates or deletes budgets
	// (nil: no limit; an operator's are not limited).
	BudgetWrites *guard.Limiter
	// Webhooks checks endpoint URLs and wakes the sender.
	Webhooks WebhookOptions
	// UsageRetention and SpanRetention are how long raw usage records
	// and work spans are kept once their months are rolled (0: for
	// ever): a question about raw rows that may be gone is refused
	// (rawHorizon), never answered short.
	UsageRetention, SpanRetention time.Duration
	// Quota, if set, keeps each project's storage within its quota: the
	// optional writes it bounds are refused past it (nil: no quota).
	Quota *quota.Keeper
}

// MaxTokenLen is the longest bearer token the API looks at: tokens it
// issues are 64 characters, and a longer one is refused before it is
// hashed or looked up.
const MaxTokenLen = 256

// TimeHeader carries the server's clock on every response.
const TimeHeader = "Sparecap-Time"

// SessionCookie names the console's session cookie.
const SessionCookie = "sparecap_session"

// CSRFHeader carries the session's CSRF token on requests that change
// something; a cookie alone never authorises a change.
const CSRFHeader = "X-CSRF-Token"

// Sessions resolves a console session to the token it signed in with.
type Sessions interface {
	Lookup(id string) (token, csrf string, ok bool)
}

// New returns the API server. Tokens, operators' included, are the
// store's (see BootstrapOperator). clk is the server's clock, which may
// run faster than real time (--speed); wall is real time, for what is
// people's or the network's (tokens, sockets).
func New(st store.Store, ctrl *controller.Controller, clk, wall clock.Clock, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: st, ctrl: ctrl, clock: clk, wall: wall, realClock: wall, log: log, mux: http.NewServeMux(), KeepAlive: 15 * time.Second,
		planSlot: make(chan struct{}, 1)}
	s.routes()
	return s
}

// HashToken is how tokens are stored: hex SHA-256. Tokens are 256-bit
// random values, so an unsalted fast hash is enough.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// unrouted answers requests no route takes, in the API's JSON error shape:
// 405 with an Allow header when the path exists under other methods, 404
// otherwise.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "", echof("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
		return
	}
	writeError(w, http.StatusNotFound, apiv1.CodeNotFound, "", echof("no such endpoint: %s %s", r.Method, r.URL.Path))
}

// ServeHTTP logs each request (never its Authorization header).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.realClock.Now()
	// The server's clock may run faster than real time (--speed): clients
	// measure ages and countdowns against this, not their own clock.
	w.Header().Set(TimeHeader, s.clock.Now().UTC().Format(time.RFC3339Nano))
	rec := &statusRecorder{ResponseWriter: w, status: 200, compact: !wantsPretty(r)}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.unrouted(rec, r)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", s.realClock.Now().Sub(start))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	// compact: the JSON body is written without indentation (see
	// wantsPretty).
	compact bool
}

// wantsPretty reports whether a request gets indented JSON: asked for
// with ?pretty (or ?pretty=true), or sent by curl, Wget or HTTPie, which
// show the body to a person. Programs (the CLI, the SDKs, the console)
// get compact JSON: indenting a 50-cluster list cost a third of its
// answer time. kube-apiserver chooses the same way.
func wantsPretty(r *http.Request) bool {
	if v, ok := r.URL.Query()["pretty"]; ok {
		return len(v) == 0 || v[0] == "" || v[0] == "true" || v[0] == "1"
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl/") || strings.HasPrefix(ua, "Wget/") || strings.HasPrefix(ua, "HTTPie/")
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (an event
// stream clears its deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// principal is who is calling: an operator (admin), or one project. key
// is the hash of the token it called with, for the per-token limits;
// tokenID names that token in the logs.
type principal struct {
	admin   bool
	project string
	key     string
	tokenID string
}

// sees reports whether the caller may see a project's resources.
func (p principal) sees(project string) bool { return p.admin || p.project == project }

type handler func(w http.ResponseWriter, r *http.Request, p principal)

// storeError is a failure to authenticate that is the store's, not the
// caller's: never a 401.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }

func (s *Server) authenticate(r *http.Request) (principal, error) {
	// The scheme is case-insensitive (RFC 7235).
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if r.Header.Get("Authorization") == "" && s.Sessions != nil {
		var err error
		if token, err = s.sessionToken(r); err != nil {
			return principal{}, err
		}
		scheme, ok = "Bearer", token != ""
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return principal{}, errors.New("missing bearer token: send Authorization: Bearer <token>")
	}
	if len(token) > MaxTokenLen {
		return principal{}, fmt.Errorf("invalid token: longer than %d characters", MaxTokenLen)
	}
	hash := HashToken(token)
	t, err := s.store.TokenByHash(r.Context(), hash)
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			return principal{}, errors.New("invalid token")
		}
		// The token could not be checked: not the caller's fault.
		return principal{}, storeError{err}
	}
	now := s.wall.Now()
	if why := tokenState(t, now); why != "" {
		return principal{}, fmt.Errorf("%s (token %s)", why, t.ID)
	}
	s.uses.note(hash, now)
	return principal{admin: t.Operator(), project: t.ProjectID, key: hash, tokenID: t.ID}, nil
}

// sessionToken returns the token of the request's console session, if it
// has one. Requests that change something must also carry the session's
// CSRF token in CSRFHeader: the cookie goes along with any request the
// browser makes, the header only with the console's own.
// ForwardAuth returns the Authorization header a request forwarded to the
// leader must carry: the request's own, or the bearer token of its console
// session (checked here, CSRF header included, since sessions live in
// this server).
func (s *Server) ForwardAuth(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" || s.Sessions == nil {
		return h, nil
	}
	token, err := s.sessionToken(r)
	if err != nil || token == "" {
		return "", err
	}
	return "Bearer " + token, nil
}

func (s *Server) sessionToken(r *http.Request) (string, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return "", nil
	}
	token, csrf, ok := s.Sessions.Lookup(c.Value)
	if !ok {
		return "", errors.New("the console session has expired; sign in again")
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if got := r.Header.Get(CSRFHeader); subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
			return "", errors.New("missing or wrong " + CSRFHeader + " header for a session-authenticated change")
		}
	}
	return token, nil
}

func (s *Server) auth(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := s.Addrs.Of(r)
		// An address that has used up its failed attempts is refused
		// before its token is looked at: guessing stops there.
		if ok, wait := s.AuthFailures.Ready(addr); !ok {
			s.log.Info("authentication refused: too many failed attempts", "client", addr, "method", r.Method, "path", r.URL.Path)
			tooMany(w, wait, "too many failed authentications from "+addr)
			return
		}
		p, err := s.authenticate(r)
		var se storeError
		if errors.As(err, &se) {
			s.fail(w, r, se.err)
			return
		}
		if err != nil {
			s.AuthFailures.Allow(addr)
			// Never the token: its hash would do for a guess checked offline.
			s.log.Info("authentication failed", "client", addr, "method", r.Method, "path", r.URL.Path, "reason", err.Error())
			if r.ContentLength != 0 {
				// Not worth reading the rest of a body nobody will use.
				w.Header().Set("Connection", "close")
			}
			writeError(w, http.StatusUnauthorized, apiv1.CodeUnauthorized, "", err.Error())
			return
		}
		if ok, wait := s.PerToken.Allow(p.key); !ok {
			tooMany(w, wait, "too many requests with this token")
			return
		}
		h(w, r, p)
	})
}

// tooMany answers 429 with Retry-After.
func tooMany(w http.ResponseWriter, wait time.Duration, why string) {
	after := guard.RetryAfter(wait)
	w.Header().Set("Retry-After", after)
	writeError(w, http.StatusTooManyRequests, apiv1.CodeRateLimited, "", why+"; retry in "+after+" s")
}

// Reject writes a refusal of the guards in front of the API (package
// guard) in the API's error shape.
func Reject(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	writeError(w, status, code, "", msg)
}

func (s *Server) admin(h handler) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, p principal) {
		if !p.admin {
			writeError(w, http.StatusForbidden, apiv1.CodeForbidden, "", "this endpoint needs the admin token")
			return
		}
		h(w, r, p)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if !compactJSON(w) {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}

// encodeJSON is what writeJSON writes of v.
func encodeJSON(v any, compact bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if !compact {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
	return buf.Bytes()
}

// writeBody writes a body encodeJSON made.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// compactJSON reports whether the JSON written to w goes without
// indentation (see wantsPretty).
func compactJSON(w http.ResponseWriter) bool {
	rec, ok := w.(*statusRecorder)
	return ok && rec.compact
}

// maxErrorMessage bounds an error's message as written, whatever a
// handler put in it. The request's text in it is cut to echoMax first
// (echof), so that an answer to any request stays under 1 KB; the
// longest messages of our own (a kubeconfig's missing permissions) are
// longer.
const maxErrorMessage = 2048

// writeError writes an error answer, its message and field bounded and
// without control characters; it escapes no HTML (an answer is JSON, and
// "<" as \u003c would take six bytes of the bound).
func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	body := apiv1.ErrorBody{Code: code, Message: echoable(bound.Text(msg, maxErrorMessage)), Field: bound.Line(field, echoMax)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if !compactJSON(w) {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(apiv1.Error{Error: body})
}

// echoable drops control characters but newlines from s.
func echoable(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return -1
		}
		return r
	}, s)
}

// fail maps an error to its response. Internal errors are logged once here
// and answered without detail.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var bad *badRequest
	var sf *controller.ShortfallError
	var ce *clientError
	switch {
	case errors.As(err, &ce):
		writeError(w, ce.status, ce.code, "", ce.msg)
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, apiv1.CodeInvalid, bad.field, bad.msg)
	case errors.As(err, &sf):
		writeError(w, http.StatusConflict, apiv1.CodeNoCapacity, "num_gpus", sf.Error())
	case errors.Is(err, controller.ErrDeleting), errors.Is(err, controller.ErrStarted):
		writeError(w, http.StatusConflict, apiv1.CodeConflict, "", err.Error())
	case errors.Is(err, domain.ErrNotFound):
		writeError(w, http.StatusNotFound, apiv1.CodeNotFound, "", strings.TrimSuffix(err.Error(), ": "+domain.ErrNotFound.Error()))
	case errors.Is(err, domain.ErrConflict):
		// The code already says "conflict"; the message need not end in it.
		writeError(w, http.StatusConflict, apiv1.CodeConflict, "", strings.TrimSuffix(err.Error(), ": "+domain.ErrConflict.Error()))
	case errors.Is(err, store.ErrFenced):
		// Leadership moved while the request ran: nothing was committed.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, apiv1.CodeUnavailable, "", "leadership is moving to another server; nothing was changed: retry")
	case store.Unavailable(err):
		// The database could not be reached or the connection broke.
		w.Header().Set("Retry-After", "1")
		msg := "the database is unreachable right now; retry"
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			msg = "the database connection failed; the change may or may not have been made: check, then retry"
		}
		s.log.Warn("database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, apiv1.CodeUnavailable, "", msg)
	case errors.Is(err, context.Canceled):
		// The client went away.
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, apiv1.CodeInternal, "", "internal error; see the server log")
	}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if _, err := s.store.ListProjects(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, apiv1.CodeInternal, "", "store unavailable")
		return
	}
	body := apiv1.Health{Status: "ready"}
	if s.Role != nil {
		if body.Role = s.Role(); body.Role == "" {
			// Still finding out whether it leads: not ready to serve yet.
			writeError(w, http.StatusServiceUnavailable, apiv1.CodeUnavailable, "", "starting: campaigning for leadership")
			return
		}
	}
	writeJSON(w, 200, body)
}
