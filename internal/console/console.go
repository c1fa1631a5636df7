// Package console is the web console, served by sparecap server under
// /console/. Pages are rendered on the server from the public REST API —
// called in-process with the signed-in user's own token, so the console can
// see and do exactly what the CLI could with that token, nothing more. The
// browser holds only an HTTP-only session cookie; a little JavaScript adds
// local times, countdowns, charts and the live event timeline, which it
// reads from the same API with that cookie.
package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console serves the web console.
type Console struct {
	api      http.Handler
	sessions *Sessions
	clock    clock.Clock
	log      *slog.Logger
	pages    map[string]*template.Template
	mux      *http.ServeMux
	// Speed of the server's clock relative to real time (1 unless the
	// server runs with --speed).
	Speed float64
}

// New returns the console over the API handler.
func New(apiHandler http.Handler, sessions *Sessions, clk clock.Clock, log *slog.Logger) *Console {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{api: apiHandler, sessions: sessions, clock: clk, log: log, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"utc":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"tptr": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"pct": func(a, b int) int {
			if b <= 0 {
				return 0
			}
			return min(100, a*100/b)
		},
		"gpuh":    func(s int64) string { return fmt.Sprintf("%.2f", float64(s)/3600) },
		"splits":  func() []string { return workSplits },
		"dur":     func(s int64) string { return (time.Duration(s) * time.Second).String() },
		"list":    func(v ...int) []int { return v },
		"join":    strings.Join,
		"latency": latency,
		"has":     func(m map[string]bool, k string) bool { return m[k] },
		"hours":   func(h float64) string { return fmt.Sprintf("%.1f h", h) },
		"deref":   func(p *float64) float64 { return *p },
		"secs":    func(s float64) string { return time.Duration(s * float64(time.Second)).Round(time.Second).String() },
		"share":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"field":   func(m map[string]any, k string) any { return m[k] },
		"per100":  func(r float64) float64 { return 100 * r },
		"bytes":   apiv1.Bytes,
		"ofQuota": func(used, quota int64) string {
			if quota <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", 100*float64(used)/float64(quota))
		},
	}
	for _, page := range []string{"login", "clusters", "new", "cluster", "scale", "usage", "fleet", "tokens", "webhooks", "webhook", "error", "plan", "simulations", "simulation", "week", "lending", "storage"} {
		c.pages[page] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html"))
	}
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.loginPage)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("POST /console/logout", c.signedIn(c.logout))
	c.mux.HandleFunc("GET /console/{$}", c.signedIn(c.clusters))
	c.mux.HandleFunc("GET /console/clusters/new", c.signedIn(c.newCluster))
	c.mux.HandleFunc("POST /console/clusters", c.signedIn(c.createCluster))
	c.mux.HandleFunc("GET /console/clusters/{id}", c.signedIn(c.cluster))
	c.mux.HandleFunc("GET /console/clusters/{id}/scale", c.signedIn(c.scalePage))
	c.mux.HandleFunc("POST /console/clusters/{id}/scale", c.signedIn(c.scale))
	c.mux.HandleFunc("POST /console/clusters/{id}/delete", c.signedIn(c.deleteCluster))
	c.mux.HandleFunc("POST /console/clusters/{id}/nodes/{node}/convert", c.signedIn(c.convertNode))
	c.mux.HandleFunc("POST /console/budgets", c.signedIn(c.createBudget))
	c.mux.HandleFunc("GET /console/lending", c.signedIn(c.lending))
	c.mux.HandleFunc("GET /console/storage", c.signedIn(c.storage))
	c.mux.HandleFunc("GET /console/usage", c.signedIn(c.usage))
	c.mux.HandleFunc("GET /console/fleet", c.signedIn(c.fleet))
	c.mux.HandleFunc("GET /console/pools/week", c.signedIn(c.week))
	c.mux.HandleFunc("GET /console/plan", c.signedIn(c.plan))
	c.mux.HandleFunc("GET /console/simulations", c.signedIn(c.simulations))
	c.mux.HandleFunc("POST /console/simulations", c.signedIn(c.startSimulation))
	c.mux.HandleFunc("GET /console/simulations/{id}", c.signedIn(c.simulation))
	c.mux.HandleFunc("POST /console/simulations/{id}/cancel", c.signedIn(c.cancelSimulation))
	c.mux.HandleFunc("GET /console/tokens", c.signedIn(c.tokens))
	c.mux.HandleFunc("POST /console/tokens", c.signedIn(c.createToken))
	c.mux.HandleFunc("POST /console/tokens/{id}/revoke", c.signedIn(c.revokeToken))
	c.mux.HandleFunc("POST /console/tokens/{id}/rotate", c.signedIn(c.rotateToken))
	c.mux.HandleFunc("GET /console/webhooks", c.signedIn(c.webhooks))
	c.mux.HandleFunc("POST /console/webhooks", c.signedIn(c.createWebhook))
	c.mux.HandleFunc("GET /console/webhooks/{id}", c.signedIn(c.webhook))
	c.mux.HandleFunc("POST /console/webhooks/{id}/{action}", c.signedIn(c.webhookAction))
	return c
}

// ServeHTTP serves /console/ with headers that keep pages from being
// framed, sniffed or cached.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
	if !strings.HasPrefix(r.URL.Path, "/console/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if r.URL.Path == "/console" {
		http.Redirect(w, r, "/console/", http.StatusFound)
		return
	}
	if r.Method == http.MethodPost {
		// Parsed here, once, so that a form over the server's body cap
		// is refused as such rather than read as an empty form.
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			status, msg := http.StatusBadRequest, "The form could not be read."
			if errors.As(err, &tooBig) {
				status, msg = http.StatusRequestEntityTooLarge, "The form is larger than the console takes."
				w.Header().Set("Connection", "close")
			}
			c.render(w, status, "error", view{Title: http.StatusText(status), Error: msg}, nil)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// inProcess sends API requests straight to the API handler: the same
// public API, without a network hop.
type inProcess struct{ h http.Handler }

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	// A server's request always has a body; a client's without one (a
	// DELETE) has none.
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, req)
	return &http.Response{StatusCode: rec.status, Status: http.StatusText(rec.status), Header: rec.header,
		Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req}, nil
}

func (c *Console) client(token string) *client.Client {
	// The sessions' clock is the server's wall clock.
	return client.New("http://sparecap.console", token, client.WithHTTPClient(&http.Client{Transport: inProcess{c.api}}),
		client.WithUserAgent("sparecap-console"), client.WithClock(c.sessions.clock))
}

// view is what every page template gets.
type view struct {
	Title   string
	Admin   bool
	Project string
	CSRF    string
	Nav     string
	// ServerNow and Speed let the page count deadlines down on the
	// server's clock, which runs Speed times faster than real time in
	// demos.
	ServerNow string
	Speed     float64
	Flash     string
	Error     string
	Data      any
}

type handler func(w http.ResponseWriter, r *http.Request, s *session, api *client.Client)

// signedIn runs h for a signed-in user, checks the CSRF token of every
// form post, and sends everyone else to the sign-in page.
func (c *Console) signedIn(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(api.SessionCookie)
		var sess *session
		if err == nil {
			sess, _ = c.sessions.get(ck.Value)
		}
		if sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.Path), http.StatusFound)
				return
			}
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && r.PostFormValue("csrf") != sess.csrf {
			c.render(w, http.StatusForbidden, "error", view{Title: "Forbidden", Error: "This form has expired or did not come from the console. Reload the page and try again."}, sess)
			return
		}
		calls := c.client(sess.token)
		// A session lasts as long as its token: one revoked or expired
		// since sign-in ends it here, on every page.
		if _, err := calls.WhoAmI(r.Context()); client.IsUnauthorized(err) {
			c.sessions.delete(ck.Value)
			c.setCookie(w, r, api.SessionCookie, "", -1)
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/login?ended=1&next="+url.QueryEscape(r.URL.Path), http.StatusFound)
				return
			}
			http.Error(w, "the session's token was revoked or has expired; sign in again", http.StatusUnauthorized)
			return
		}
		h(w, r, sess, calls)
	}
}

func (c *Console) render(w http.ResponseWriter, status int, page string, v view, s *session) {
	if s != nil {
		v.Admin, v.Project, v.CSRF = s.admin, s.project, s.csrf
	}
	v.ServerNow, v.Speed = c.clock.Now().UTC().Format(time.RFC3339Nano), max(c.Speed, 1)
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.log.Error("render console page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	buf.WriteTo(w)
}

// apiFailure renders an API error as a page.
func (c *Console) apiFailure(w http.ResponseWriter, s *session, err error) {
	var ae *client.APIError
	if errors.As(err, &ae) {
		status := ae.Status
		if status == http.StatusUnauthorized {
			status = http.StatusForbidden
		}
		c.render(w, status, "error", view{Title: http.StatusText(ae.Status), Error: ae.Message}, s)
		return
	}
	c.log.Error("console", "err", err)
	c.render(w, http.StatusInternalServerError, "error", view{Title: "Error", Error: "Something went wrong; see the server log."}, s)
}
