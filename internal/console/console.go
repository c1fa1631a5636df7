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
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
		"latency": latency,
		"has":     func(m map[string]bool, k string) bool { return m[k] },
		"hours":   func(h float64) string { return fmt.Sprintf("%.1f h", h) },
		"deref":   func(p *float64) float64 { return *p },
		"secs":    func(s float64) string { return time.Duration(s * float64(time.Second)).Round(time.Second).String() },
		"share":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"field":   func(m map[string]any, k string) any { return m[k] },
		"per100":  func(r float64) float64 { return 100 * r },
	}
	for _, page := range []string{"login", "clusters", "new", "cluster", "scale", "usage", "fleet", "tokens", "webhooks", "webhook", "error", "plan", "simulations", "simulation", "week", "lending"} {
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

const loginCookie = "sparecap_login"

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	// The sign-in form's CSRF token is a random value in a cookie and in
	// the form (double submit): another site can post the form but not
	// read the cookie.
	tok := randomHex(16)
	c.setCookie(w, r, loginCookie, tok, 600)
	v := view{Title: "Sign in", CSRF: tok, Data: safeNext(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("ended") != "" {
		v.Error = "Your session ended: its token was revoked or has expired. Sign in with a valid token."
	}
	c.render(w, http.StatusOK, "login", v, nil)
}

// safeNext keeps redirects after sign-in inside the console.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/console/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/console/"
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || r.PostFormValue("csrf") != ck.Value {
		c.render(w, http.StatusForbidden, "error", view{Title: "Forbidden", Error: "The sign-in form expired. Reload the page and try again."}, nil)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	fail := func(msg string) {
		tok := randomHex(16)
		c.setCookie(w, r, loginCookie, tok, 600)
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Sign in", CSRF: tok, Error: msg, Data: next}, nil)
	}
	if token == "" {
		fail("Enter a project or admin token.")
		return
	}
	who, err := c.client(token).WhoAmI(r.Context())
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
			fail("Too many failed sign-ins from your address; wait a minute and try again.")
			return
		}
		fail("That token is not valid.")
		return
	}
	id, _ := c.sessions.create(token, who.TokenID, who.Admin, who.ProjectID)
	c.setCookie(w, r, api.SessionCookie, id, int(SessionTTL.Seconds()))
	c.setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session, _ *client.Client) {
	if ck, err := r.Cookie(api.SessionCookie); err == nil {
		c.sessions.delete(ck.Value)
	}
	c.setCookie(w, r, api.SessionCookie, "", -1)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

func (c *Console) clusters(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	list, err := api.ListClusters(r.Context(), client.ListClustersOptions{})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.render(w, http.StatusOK, "clusters", view{Title: "Clusters", Nav: "clusters", Flash: r.URL.Query().Get("flash"), Data: list.Clusters}, s)
}

// offer is what the create and scale pages show for one region and GPU
// type: capacity now and prices.
type offer struct {
	Region, GPUType                      string
	OnDemandGPUs, PreemptibleGPUs, Total int
	OnDemandPrice, PreemptiblePrice      string
}

func (c *Console) offers(ctx context.Context, api *client.Client) ([]offer, error) {
	caps, err := api.Capacity(ctx)
	if err != nil {
		return nil, err
	}
	rates, err := api.Rates(ctx)
	if err != nil {
		return nil, err
	}
	price := map[string]apiv1.Rate{}
	for _, r := range rates.Rates {
		price[r.Region+"/"+r.GPUType] = r
	}
	var out []offer
	for _, cp := range caps.Capacity {
		p := price[cp.Region+"/"+cp.GPUType]
		out = append(out, offer{Region: cp.Region, GPUType: cp.GPUType, OnDemandGPUs: cp.AvailableOnDemand,
			PreemptibleGPUs: cp.AvailablePreemptible, Total: cp.Total, OnDemandPrice: p.OnDemand, PreemptiblePrice: p.Preemptible})
	}
	return out, nil
}

// form carries a create or scale form back to the page with the API's
// verdict next to the field it names.
type form struct {
	Values   map[string]string
	Errors   map[string]string
	Offers   []offer
	Projects []string
	Cluster  *apiv1.Cluster
}

func (c *Console) newCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	c.renderNew(w, r, s, api, http.StatusOK, map[string]string{"cluster_type": "KUBERNETES", "billing_type": "ON_DEMAND", "num_gpus": "8", "num_preemptible_gpus": "0"}, nil, "")
}

func (c *Console) renderNew(w http.ResponseWriter, r *http.Request, s *session, api *client.Client, status int, values, errs map[string]string, msg string) {
	offers, err := c.offers(r.Context(), api)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	f := form{Values: values, Errors: errs, Offers: offers}
	if s.admin {
		ps, err := api.ListProjects(r.Context())
		if err != nil {
			c.apiFailure(w, s, err)
			return
		}
		for _, p := range ps.Projects {
			f.Projects = append(f.Projects, p.ProjectID)
		}
	}
	c.render(w, status, "new", view{Title: "Create cluster", Nav: "new", Error: msg, Data: f}, s)
}

// formInt reads an integer field; a bad number is left for the API to
// refuse, so its message is the one users see everywhere.
func formInt(r *http.Request, name string, errs map[string]string) int {
	v := strings.TrimSpace(r.PostFormValue(name))
	n, err := strconv.Atoi(v)
	if err != nil {
		errs[name] = fmt.Sprintf("%s must be a whole number of GPUs", strings.ReplaceAll(name, "_", " "))
	}
	return n
}

func fieldError(err error, errs map[string]string) (string, bool) {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return "", false
	}
	if ae.Field != "" {
		errs[ae.Field] = ae.Message
		return "", true
	}
	return ae.Message, true
}

func (c *Console) createCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	values := map[string]string{}
	for _, k := range []string{"cluster_name", "region_gpu", "cluster_type", "billing_type", "num_gpus", "num_preemptible_gpus", "project_id", "preemptible"} {
		values[k] = r.PostFormValue(k)
	}
	errs := map[string]string{}
	region, gpu, _ := strings.Cut(values["region_gpu"], "/")
	req := apiv1.CreateClusterRequest{ClusterName: values["cluster_name"], Region: region, GPUType: gpu,
		ClusterType: values["cluster_type"], BillingType: values["billing_type"], ProjectID: values["project_id"],
		NumGPUs: formInt(r, "num_gpus", errs)}
	if values["preemptible"] == "on" {
		req.NumPreemptibleGPUs = formInt(r, "num_preemptible_gpus", errs)
	}
	if len(errs) > 0 {
		c.renderNew(w, r, s, api, http.StatusBadRequest, values, errs, "")
		return
	}
	cl, err := api.CreateCluster(r.Context(), req)
	if err != nil {
		if msg, ok := fieldError(err, errs); ok {
			if errs["region"] != "" || errs["gpu_type"] != "" {
				errs["region_gpu"] = errs["region"] + errs["gpu_type"]
			}
			c.renderNew(w, r, s, api, statusOf(err), values, errs, msg)
			return
		}
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID), http.StatusSeeOther)
}

func statusOf(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusInternalServerError
}

type clusterPage struct {
	Cluster *apiv1.Cluster
	Events  []apiv1.Event
	Cursor  string
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	cl, err := api.GetCluster(ctx, r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	evs, err := api.ListEvents(ctx, cl.ClusterID, "", 1000)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	events := slices.Clone(evs.Events)
	slices.Reverse(events) // newest first
	c.render(w, http.StatusOK, "cluster", view{Title: cl.ClusterName, Nav: "clusters", Flash: r.URL.Query().Get("flash"),
		Data: clusterPage{Cluster: cl, Events: events, Cursor: evs.NextCursor}}, s)
}

func (c *Console) scalePage(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	cl, err := api.GetCluster(r.Context(), r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.renderScale(w, r, s, api, http.StatusOK, cl, map[string]string{
		"num_gpus": strconv.Itoa(cl.NumGPUs), "num_preemptible_gpus": strconv.Itoa(cl.DesiredPreemptibleGPUs),
		"max_preemptible_gpus": strconv.Itoa(cl.MaxPreemptibleGPUs)}, nil, "")
}

func (c *Console) renderScale(w http.ResponseWriter, r *http.Request, s *session, api *client.Client, status int, cl *apiv1.Cluster, values, errs map[string]string, msg string) {
	offers, err := c.offers(r.Context(), api)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	var mine []offer
	for _, o := range offers {
		if o.Region == cl.Region && o.GPUType == cl.GPUType {
			mine = append(mine, o)
		}
	}
	c.render(w, status, "scale", view{Title: "Scale " + cl.ClusterName, Nav: "clusters", Error: msg,
		Data: form{Values: values, Errors: errs, Offers: mine, Cluster: cl}}, s)
}

func (c *Console) scale(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	cl, err := api.GetCluster(ctx, r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	values := map[string]string{"num_gpus": r.PostFormValue("num_gpus"), "num_preemptible_gpus": r.PostFormValue("num_preemptible_gpus")}
	errs := map[string]string{}
	std, pre := formInt(r, "num_gpus", errs), formInt(r, "num_preemptible_gpus", errs)
	// The queue's maximum is on the form of KUBERNETES clusters only.
	maxPre := cl.MaxPreemptibleGPUs
	if _, ok := r.PostForm["max_preemptible_gpus"]; ok {
		values["max_preemptible_gpus"] = r.PostFormValue("max_preemptible_gpus")
		maxPre = formInt(r, "max_preemptible_gpus", errs)
	}
	if len(errs) > 0 {
		c.renderScale(w, r, s, api, http.StatusBadRequest, cl, values, errs, "")
		return
	}
	var req apiv1.UpdateClusterRequest
	if std != cl.NumGPUs {
		req.NumGPUs = &std
	}
	if pre != cl.DesiredPreemptibleGPUs {
		req.NumPreemptibleGPUs = &pre
	}
	if maxPre != cl.MaxPreemptibleGPUs {
		req.MaxPreemptibleGPUs = &maxPre
	}
	if req.NumGPUs == nil && req.NumPreemptibleGPUs == nil && req.MaxPreemptibleGPUs == nil {
		http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID), http.StatusSeeOther)
		return
	}
	if _, err := api.UpdateCluster(ctx, cl.ClusterID, req); err != nil {
		if msg, ok := fieldError(err, errs); ok {
			c.renderScale(w, r, s, api, statusOf(err), cl, values, errs, msg)
			return
		}
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID)+"?flash=Scaling+requested", http.StatusSeeOther)
}

// convertNode converts a node in place (the form's "to": standard or
// preemptible); a refusal shows the API's reason.
func (c *Console) convertNode(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	id, node, to := r.PathValue("id"), r.PathValue("node"), r.PostFormValue("to")
	if to != "standard" && to != "preemptible" {
		c.render(w, http.StatusBadRequest, "error", view{Title: "Bad request", Error: "Convert a node to standard or preemptible."}, s)
		return
	}
	if _, err := api.ConvertNode(r.Context(), id, node, to); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(id)+"?flash="+url.QueryEscape("Node converted to "+to), http.StatusSeeOther)
}

func (c *Console) deleteCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if _, err := api.DeleteCluster(r.Context(), r.PathValue("id")); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/?flash=Deletion+requested", http.StatusSeeOther)
}

type usagePage struct {
	From, To  time.Time
	Month     string
	Daily     *apiv1.Usage
	ByCluster *apiv1.Usage
	// ByWork is the month split among the work on the nodes, by Split
	// (namespace, job, account, work or label) and Label (its key).
	ByWork       *apiv1.Usage
	Split, Label string
	CSVURL       string
	WorkCSVURL   string
	// Budgets with their month so far, and the alerts of the month.
	Budgets *apiv1.BudgetList
	Alerts  *apiv1.BudgetAlerts
	// Lost is the month's lost-work ledger by job, next to the savings.
	Lost *apiv1.LostWork
}

// createBudget creates a budget from the usage page's form.
func (c *Console) createBudget(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	req := apiv1.CreateBudgetRequest{Name: r.PostFormValue("name"), Amount: r.PostFormValue("amount"), Label: r.PostFormValue("label")}
	if _, err := api.CreateBudget(r.Context(), "", req); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/usage?flash="+url.QueryEscape("Budget "+req.Name+" created"), http.StatusSeeOther)
}

// workSplits are the splits the usage page offers.
var workSplits = []string{"namespace", "job", "account", "work", "label"}

func (c *Console) usage(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	now := c.clock.Now().UTC()
	month := r.URL.Query().Get("month")
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if month != "" {
		t, err := time.Parse("2006-01", month)
		if err != nil {
			c.render(w, http.StatusBadRequest, "error", view{Title: "Bad month", Error: fmt.Sprintf("%q is not a month like 2026-11.", month)}, s)
			return
		}
		from = t
	}
	to := from.AddDate(0, 1, 0)
	q := client.UsageQuery{From: from, To: to, GroupBy: "day"}
	daily, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	q.GroupBy = "cluster"
	byCluster, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	split, label := cmp.Or(r.URL.Query().Get("split"), "namespace"), cmp.Or(r.URL.Query().Get("label"), "team")
	if !slices.Contains(workSplits, split) {
		c.render(w, http.StatusBadRequest, "error", view{Title: "Bad split", Error: "Split usage by namespace, job, account, work or label."}, s)
		return
	}
	q.GroupBy = split
	if split == "label" {
		q.GroupBy = "label:" + label
	}
	byWork, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	budgets, err := api.Budgets(ctx, "")
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	alerts, err := api.BudgetAlerts(ctx, "", from.Format("2006-01"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	lost, err := api.LostWork(ctx, client.UsageQuery{From: from, To: to, GroupBy: "job"})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	csv := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "format": {"csv"}}
	workCSV := url.Values{"from": csv["from"], "to": csv["to"], "format": {"csv"}, "group_by": {q.GroupBy}}
	c.render(w, http.StatusOK, "usage", view{Title: "Usage and savings", Nav: "usage", Data: usagePage{From: from, To: to,
		Month: from.Format("2006-01"), Daily: daily, ByCluster: byCluster, ByWork: byWork, Split: split, Label: label,
		Budgets: budgets, Alerts: alerts, Lost: lost, CSVURL: "/v1/usage?" + csv.Encode(), WorkCSVURL: "/v1/usage?" + workCSV.Encode()}}, s)
}

type fleetRow struct {
	Region, GPUType, Pool, State string
	Machines, GPUs               int
}

type fleetPage struct {
	Rows         []fleetRow
	Reservations []apiv1.Reservation
	Stats        []apiv1.PreemptionStats
}

func (c *Console) fleet(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !s.admin {
		c.render(w, http.StatusForbidden, "error", view{Title: "Admins only", Error: "The fleet page needs the admin token."}, s)
		return
	}
	ctx := r.Context()
	ms, err := api.ListMachines(ctx, client.ListMachinesOptions{})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	rs, err := api.ListReservations(ctx)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	st, err := api.PreemptionStats(ctx, time.Time{}, time.Time{}, "", "")
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	counts := map[fleetRow]fleetRow{}
	for _, m := range ms.Machines {
		k := fleetRow{Region: m.Region, GPUType: m.GPUType, Pool: m.Pool, State: m.State}
		v := counts[k]
		v.Region, v.GPUType, v.Pool, v.State = k.Region, k.GPUType, k.Pool, k.State
		v.Machines++
		v.GPUs += m.GPUs
		counts[k] = v
	}
	rows := make([]fleetRow, 0, len(counts))
	for _, v := range counts {
		rows = append(rows, v)
	}
	slices.SortFunc(rows, func(a, b fleetRow) int {
		return strings.Compare(a.Region+a.GPUType+a.Pool+a.State, b.Region+b.GPUType+b.Pool+b.State)
	})
	c.render(w, http.StatusOK, "fleet", view{Title: "Fleet", Nav: "fleet", Data: fleetPage{Rows: rows, Reservations: rs.Reservations, Stats: st.Stats}}, s)
}
