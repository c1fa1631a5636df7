package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/api/apitest"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/console"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/worklog"
)

// env is the console in front of a real API on a simulated fleet.
type env struct {
	t      *testing.T
	srv    *httptest.Server
	ctrl   *controller.Controller
	clk    *clock.Fake
	sim    *sim.Fleet
	st     store.Store
	tokens map[string]string
}

// adm is the operator token of the tests.
const adm = "adm-0123456789abcdef0123456789abcdef"

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	ae := apitest.New(t, "pools: [{region: us-central-2, gpu_type: RTX_6000_PCI, machines: 3}]\nprices: {RTX_6000_PCI: \"0.89\"}", adm)
	st, clk, fl, ctrl, a := ae.Store, ae.Clock, ae.Sim, ae.Ctrl, ae.API
	var err error
	// Every pool has a minimum lease of an hour: nodes show its end.
	a.MinLease = func(*domain.Machine) time.Duration { return time.Hour }
	if a.Sealer, err = secret.NewSealer(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	sessions := console.NewSessions(clock.Real{})
	a.Sessions = sessions
	mux := http.NewServeMux()
	mux.Handle("/console/", console.New(a, sessions, clk, nil))
	mux.Handle("/", contracttest.Handler(t, a))
	e := &env{t: t, srv: httptest.NewServer(mux), ctrl: ctrl, clk: clk, sim: fl, st: st, tokens: map[string]string{"admin": adm}}
	t.Cleanup(e.srv.Close)
	for _, p := range []string{"p", "q"} {
		var tok string
		st.Update(ctx, func(tx store.Tx) error { return nil })
		body := e.apiAs(adm, "POST", "/v1/admin/projects", `{"project_id":"`+p+`"}`, 201)
		tok = regexp.MustCompile(`"token":\s*"([^"]+)"`).FindStringSubmatch(body)[1]
		e.tokens[p] = tok
	}
	return e
}

func (e *env) apiAs(token, method, path, body string, want int) string {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return string(b)
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t  *testing.T
	e  *env
	hc *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, e: e, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) (int, string, http.Header) {
	b.t.Helper()
	resp, err := b.hc.Get(b.e.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func (b *browser) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	resp, err := b.hc.PostForm(b.e.srv.URL+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

func (b *browser) signIn(token string) string {
	b.t.Helper()
	_, page, _ := b.get("/console/login")
	status, _, h := b.post("/console/login", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}, "next": {"/console/"}})
	if status != http.StatusSeeOther || h.Get("Location") != "/console/" {
		b.t.Fatalf("sign in: %d %s", status, h.Get("Location"))
	}
	_, home, _ := b.get("/console/")
	return csrfOf(b.t, home)
}

func TestSignInSetsSecureCookieAndSignOutClearsIt(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	// Not signed in: pages send you to the sign-in page.
	if status, _, h := b.get("/console/usage"); status != http.StatusFound || !strings.HasPrefix(h.Get("Location"), "/console/login") {
		t.Fatalf("%d %s", status, h.Get("Location"))
	}
	_, page, _ := b.get("/console/login")
	status, _, h := b.post("/console/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {e.tokens["p"]}})
	if status != http.StatusSeeOther {
		t.Fatalf("status %d", status)
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == api.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || strings.Contains(session.Value, e.tokens["p"]) {
		t.Fatalf("session cookie %+v", session)
	}
	if strings.Contains(h.Get("Location"), e.tokens["p"]) {
		t.Fatal("token in a URL")
	}
	_, home, _ := b.get("/console/")
	csrf := csrfOf(t, home)
	if !strings.Contains(home, "project p") {
		t.Fatal("the header does not say which project is signed in")
	}
	if strings.Contains(home, e.tokens["p"]) {
		t.Fatal("the page shows the token")
	}
	if status, _, _ := b.post("/console/logout", url.Values{"csrf": {csrf}}); status != http.StatusSeeOther {
		t.Fatalf("sign out %d", status)
	}
	if status, _, _ := b.get("/console/"); status != http.StatusFound {
		t.Fatalf("still signed in after sign out: %d", status)
	}
}

func TestSignInRefusesBadTokenAndForgedForm(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	_, page, _ := b.get("/console/login")
	if status, body, _ := b.post("/console/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {"nope"}}); status != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
		t.Fatalf("%d", status)
	}
	// A form posted without the login cookie's value (another site's form).
	other := e.browser()
	if status, _, _ := other.post("/console/login", url.Values{"csrf": {"guess"}, "token": {e.tokens["p"]}}); status != http.StatusForbidden {
		t.Fatalf("forged sign-in: %d", status)
	}
}

func TestCreateThroughTheFormWithFieldErrors(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	_, page, _ := b.get("/console/clusters/new")
	for _, want := range []string{`us-central-2/RTX_6000_PCI`, `data-odprice="0.89"`, `data-preprice="0.445"`, `role="switch"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("create page lacks %q", want)
		}
	}
	form := url.Values{"csrf": {csrf}, "cluster_name": {"train"}, "region_gpu": {"us-central-2/RTX_6000_PCI"},
		"cluster_type": {"KUBERNETES"}, "billing_type": {"ON_DEMAND"}, "num_gpus": {"12"}, "preemptible": {"on"}, "num_preemptible_gpus": {"16"}}
	status, body, _ := b.post("/console/clusters", form)
	if status != http.StatusBadRequest || !strings.Contains(body, `id="err-num_gpus"`) || !strings.Contains(body, "multiple of 8") {
		t.Fatalf("validation error not next to its field: %d\n%s", status, body)
	}
	if !strings.Contains(body, `value="train"`) {
		t.Fatal("the form lost what was typed")
	}
	// Output is escaped.
	form.Set("cluster_name", `<script>alert(1)</script>`)
	form.Set("num_gpus", "8")
	_, body, _ = b.post("/console/clusters", form)
	if strings.Contains(body, "<script>alert(1)</script>") || !strings.Contains(body, `id="err-cluster_name"`) {
		t.Fatal("unescaped or unreported bad name")
	}
	form.Set("cluster_name", "train")
	status, _, h := b.post("/console/clusters", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/clusters/c-") {
		t.Fatalf("create: %d %s", status, h.Get("Location"))
	}
	status, page, _ = b.get(h.Get("Location"))
	if status != 200 || !strings.Contains(page, "gpu-preemptible-dp-") || !strings.Contains(page, `id="timeline"`) {
		t.Fatalf("cluster page %d", status)
	}
	if !strings.Contains(page, `Kubernetes: <span id="kube">simulated</span>`) {
		t.Fatal("the cluster page does not say its Kubernetes is simulated")
	}
	// Once an operator attaches a kubeconfig, the page says so (and shows
	// nothing of it).
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: k, cluster: {server: \"https://k8s.example:6443\"}}]\n" +
		"users: [{name: u, user: {token: secret-token}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\ncurrent-context: c\n"
	id := strings.TrimPrefix(h.Get("Location"), "/console/clusters/")
	req, _ := json.Marshal(map[string]string{"kubeconfig": kc})
	e.apiAs(adm, "PUT", "/v1/admin/clusters/"+id+"/kubeconfig", string(req), 200)
	_, page, _ = b.get(h.Get("Location"))
	if !strings.Contains(page, `Kubernetes: <span id="kube">attached</span>`) || strings.Contains(page, "k8s.example") || strings.Contains(page, "secret-token") {
		t.Fatal("the cluster page does not say its Kubernetes is attached, or shows the kubeconfig")
	}
	// A SLURM cluster from the same form says Slurm, not Kubernetes.
	form.Set("cluster_type", "SLURM")
	form.Set("cluster_name", "hpc")
	status, _, h = b.post("/console/clusters", form)
	if status != http.StatusSeeOther {
		t.Fatalf("create SLURM: %d", status)
	}
	_, page, _ = b.get(h.Get("Location"))
	if !strings.Contains(page, `Slurm: <span id="slurm">simulated</span>`) || !strings.Contains(page, "· SLURM ·") || strings.Contains(page, `id="kube"`) {
		t.Fatal("the SLURM cluster's page does not say Slurm")
	}
	form.Set("cluster_type", "KUBERNETES")
	// A form without the CSRF token changes nothing.
	form.Set("csrf", "forged")
	form.Set("cluster_name", "other")
	if status, _, _ := b.post("/console/clusters", form); status != http.StatusForbidden {
		t.Fatalf("forged form: %d", status)
	}
}

func TestAnotherProjectsClusterIsNotReachable(t *testing.T) {
	e := newEnv(t)
	body := e.apiAs(e.tokens["p"], "POST", "/v1/clusters", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`, 201)
	id := regexp.MustCompile(`"cluster_id":\s*"([^"]+)"`).FindStringSubmatch(body)[1]
	b := e.browser()
	csrf := b.signIn(e.tokens["q"])
	for _, path := range []string{"/console/clusters/" + id, "/console/clusters/" + id + "/scale"} {
		if status, _, _ := b.get(path); status != http.StatusNotFound {
			t.Fatalf("%s: %d", path, status)
		}
	}
	// Deleting another project's cluster fails; it does not pretend.
	if status, _, _ := b.post("/console/clusters/"+id+"/delete", url.Values{"csrf": {csrf}}); status != http.StatusNotFound {
		t.Fatalf("delete of another project's cluster: %d", status)
	}
	if body := e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200); strings.Contains(body, "Deleting") {
		t.Fatal("q deleted p's cluster")
	}
	_, list, _ := b.get("/console/")
	if strings.Contains(list, id) {
		t.Fatal("q's list shows p's cluster")
	}
}

func TestAPISessionCookieNeedsCSRFForChanges(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	if status, _, _ := b.get("/v1/clusters"); status != 200 {
		t.Fatalf("GET with the session cookie: %d", status)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/clusters", strings.NewReader(`{"cluster_name":"x","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`))
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("cookie POST without CSRF header: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", e.srv.URL+"/v1/clusters", strings.NewReader(`{"cluster_name":"x","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`))
	req.Header.Set(api.CSRFHeader, csrf)
	resp, err = b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("cookie POST with CSRF header: %d", resp.StatusCode)
	}
}

func TestScaleUsageAndFleetPages(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/clusters/" + id + "/scale")
	if status != 200 || !strings.Contains(page, "On demand") || !strings.Contains(page, "Preemptible") || !strings.Contains(page, `data-preprice="0.445"`) {
		t.Fatalf("scale page %d", status)
	}
	status, page, _ = b.post("/console/clusters/"+id+"/scale", url.Values{"csrf": {csrf}, "num_gpus": {"8"}, "num_preemptible_gpus": {"-8"}})
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-num_preemptible_gpus"`) {
		t.Fatalf("scale validation %d", status)
	}
	if status, _, _ := b.post("/console/clusters/"+id+"/scale", url.Values{"csrf": {csrf}, "num_gpus": {"8"}, "num_preemptible_gpus": {"16"}}); status != http.StatusSeeOther {
		t.Fatalf("scale %d", status)
	}
	if !strings.Contains(e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200), `"desired_preemptible_gpus":16`) {
		t.Fatal("scale not applied")
	}
	// The queue's maximum: a bad value is shown next to its field and
	// changes nothing; a good one is applied and shown on the cluster page.
	status, page, _ = b.post("/console/clusters/"+id+"/scale", url.Values{"csrf": {csrf}, "num_gpus": {"8"}, "num_preemptible_gpus": {"16"}, "max_preemptible_gpus": {"12"}})
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-max_preemptible_gpus"`) || !strings.Contains(page, "multiple of 8") {
		t.Fatalf("scale with a bad queue maximum: %d", status)
	}
	if status, _, _ := b.post("/console/clusters/"+id+"/scale", url.Values{"csrf": {csrf}, "num_gpus": {"8"}, "num_preemptible_gpus": {"16"}, "max_preemptible_gpus": {"64"}}); status != http.StatusSeeOther {
		t.Fatalf("scale with a queue maximum: %d", status)
	}
	if !strings.Contains(e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200), `"max_preemptible_gpus":64`) {
		t.Fatal("queue maximum not applied")
	}
	if _, page, _ = b.get("/console/clusters/" + id); !strings.Contains(page, `at most <span id="max">64</span>`) || strings.Contains(page, `id="queue" hidden`) {
		t.Fatalf("cluster page does not show the queue's maximum:\n%s", page)
	}
	status, page, _ = b.get("/console/usage")
	if status != 200 || !strings.Contains(page, `id="usage-chart"`) || !strings.Contains(page, "chart.umd.min.js") || !strings.Contains(page, "format=csv") {
		t.Fatalf("usage page %d", status)
	}
	if status, _, _ := b.get("/console/fleet"); status != http.StatusForbidden {
		t.Fatalf("fleet page for a project: %d", status)
	}
	admin := e.browser()
	admin.signIn(adm)
	status, page, _ = admin.get("/console/fleet")
	if status != 200 || !strings.Contains(page, "us-central-2") || !strings.Contains(page, "Preemptions") {
		t.Fatalf("fleet page %d", status)
	}
	if status, _, h := admin.get("/console/static/chart.umd.min.js"); status != 200 || !strings.Contains(h.Get("Content-Type"), "javascript") {
		t.Fatalf("chart library %d %s", status, h.Get("Content-Type"))
	}
	if _, _, h := admin.get("/console/"); !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") || h.Get("X-Frame-Options") != "DENY" {
		t.Fatal("security headers missing")
	}
}

// readyCluster creates project p's cluster "a" with a standard and a
// preemptible node, and runs the controller until both are ready.
func (e *env) readyCluster() string {
	body := e.apiAs(e.tokens["p"], "POST", "/v1/clusters", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8,"num_preemptible_gpus":8}`, 201)
	id := regexp.MustCompile(`"cluster_id":\s*"([^"]+)"`).FindStringSubmatch(body)[1]
	for i := 0; i < 10; i++ {
		e.ctrl.Turn(context.Background())
		e.clk.Step(10 * time.Second)
	}
	return id
}

// TestClusterPageShowsLostNode: a node whose Node object the tenant
// deleted is shown as lost on the cluster page.
func TestClusterPageShowsLostNode(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	name := regexp.MustCompile(`"node_name":\s*"(gpu-preemptible-dp-[0-9]+)"`).FindStringSubmatch(e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200))[1]
	if err := e.sim.Release(context.Background(), id, name); err != nil {
		t.Fatal(err)
	}
	e.ctrl.Turn(context.Background())
	b := e.browser()
	b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/clusters/" + id)
	if status != 200 || !strings.Contains(page, "removing (lost)") {
		t.Fatalf("cluster page %d does not show the lost node", status)
	}
}

// TestClusterPageShowsLeaseEnd: a ready preemptible node of a pool with
// a minimum lease shows when its lease ends.
func TestClusterPageShowsLeaseEnd(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	ready := regexp.MustCompile(`"lease_end":\s*"([^"]+)"`).FindStringSubmatch(e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200))
	if ready == nil {
		t.Fatal("no node of the cluster has a lease_end")
	}
	b := e.browser()
	b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/clusters/" + id)
	if status != 200 || !strings.Contains(page, `lease ends <time datetime="`+ready[1]+`"`) {
		t.Fatalf("cluster page %d does not show the lease's end %s", status, ready[1])
	}
}

func TestClusterPageShowsMissingPermissions(t *testing.T) {
	e := newEnv(t)
	body := e.apiAs(e.tokens["p"], "POST", "/v1/clusters", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`, 201)
	id := regexp.MustCompile(`"cluster_id":\s*"([^"]+)"`).FindStringSubmatch(body)[1]
	b := e.browser()
	b.signIn(e.tokens["p"])
	if _, page, _ := b.get("/console/clusters/" + id); strings.Contains(page, "Missing permissions") {
		t.Fatal("a cluster with nothing missing shows missing permissions")
	}
	e.ctrl.RecordAccess(driver.AccessReport{ClusterID: id, Missing: []domain.MissingPermission{
		{Permission: "patch pods/status", Effect: "Jobs count the reclaim as a <failure>: grant patch on pods/status"}}})
	e.ctrl.Turn(context.Background())
	_, page, _ := b.get("/console/clusters/" + id)
	if !strings.Contains(page, "Missing permissions") || !strings.Contains(page, "<code>patch pods/status</code> (courtesy): Jobs count the reclaim as a &lt;failure&gt;") {
		t.Fatalf("cluster page does not show the missing permission:\n%s", page)
	}
}

// TestConvertFromTheClusterPage: the cluster page offers each ready node
// its conversion; posting it converts the node and the page shows the new
// class and since when; a refusal shows the API's reason; a bad class or
// a missing CSRF token changes nothing.
func TestConvertFromTheClusterPage(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	body := e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200)
	m := regexp.MustCompile(`"node_id":\s*"([^"]+)",\s*"node_name":\s*"(gpu-preemptible-dp-[0-9]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no preemptible node in %s", body)
	}
	node := m[1]
	_, page, _ := b.get("/console/clusters/" + id)
	action := "/console/clusters/" + id + "/nodes/" + node + "/convert"
	if !strings.Contains(page, `action="`+action+`"`) || !strings.Contains(page, "Make standard") {
		t.Fatalf("the cluster page offers no conversion of %s:\n%s", node, page)
	}
	if status, _, _ := b.post(action, url.Values{"to": {"standard"}}); status == http.StatusSeeOther {
		t.Fatal("a conversion without the CSRF token was taken")
	}
	if status, _, _ := b.post(action, url.Values{"csrf": {csrf}, "to": {"spot"}}); status != http.StatusBadRequest {
		t.Fatalf("a conversion to spot: %d", status)
	}
	e.clk.Step(time.Second)
	if status, _, h := b.post(action, url.Values{"csrf": {csrf}, "to": {"standard"}}); status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "flash=Node+converted") {
		t.Fatalf("convert: %d %s", status, h.Get("Location"))
	}
	if body := e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200); !strings.Contains(body, `"num_gpus":16`) || strings.Contains(body, `"compute_class":"preemptible"`) {
		t.Fatalf("not converted: %s", body)
	}
	_, page, _ = b.get("/console/clusters/" + id)
	if !strings.Contains(page, `<small class="since">since <time`) || !strings.Contains(page, "Make preemptible") {
		t.Fatalf("the cluster page does not show the conversion:\n%s", page)
	}
	// Converting it back at once is refused, with the reason.
	status, page, _ := b.post(action, url.Values{"csrf": {csrf}, "to": {"preemptible"}})
	if status != http.StatusConflict || !strings.Contains(page, "may convert again from") {
		t.Fatalf("converting back at once: %d\n%s", status, page)
	}
}

// TestPoolWeekPage: the cluster page links its pool's week, whose page
// shows the hours of the week as a heatmap (a row a day, "·" where too
// little service tells nothing), the next 24 hours and the GPUs forecast
// to lend in them, and says plainly that
// a new pool's history is too short; a pool the fleet lacks is refused.
func TestPoolWeekPage(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	b := e.browser()
	b.signIn(e.tokens["p"])
	_, page, _ := b.get("/console/clusters/" + id)
	link := "/console/pools/week?region=us-central-2&amp;gpu_type=RTX_6000_PCI"
	if !strings.Contains(page, `href="`+link+`"`) {
		t.Fatalf("the cluster page does not link its pool's week:\n%s", page)
	}
	status, page, _ := b.get(strings.ReplaceAll(link, "&amp;", "&"))
	if status != 200 || strings.Count(page, "<tr><th scope=\"row\">") != 7 || !strings.Contains(page, `<th scope="row">Sun</th>`) ||
		!strings.Contains(page, `class="heat-none"`) || !strings.Contains(page, "Too little history: only") || strings.Count(page, "<tr><td><time") != 48 {
		t.Fatalf("week page %d:\n%s", status, page)
	}
	// The GPUs it is forecast to lend in those hours, with as little
	// history said plainly.
	if !strings.Contains(page, `id="capacity-forecast"`) || !strings.Contains(page, "Of the pool's 24 GPUs in service") || !strings.Contains(page, "Too little history for a 90% interval") {
		t.Fatalf("week page without the capacity forecast:\n%s", page)
	}
	if status, page, _ := b.get("/console/pools/week?region=us-central-2&gpu_type=H100"); status != 400 || !strings.Contains(page, "no pool") {
		t.Fatalf("a pool the fleet lacks: %d\n%s", status, page)
	}
}

// TestUsageSplitByWork: the usage page splits the month's cost among the
// pods that ran, as the work recorder saw them in the cluster, by a label
// the user picks; what no pod held is idle.
func TestUsageSplitByWork(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	nodes, err := e.st.ListNodes(t.Context(), store.NodeFilter{ClusterID: id})
	if err != nil || len(nodes) != 2 {
		t.Fatal(nodes, err)
	}
	if err := e.sim.AddPod(id, nodes[0].Name, sim.PodTemplate{Namespace: "ml", Name: "trainer", GPUs: 4,
		Labels: map[string]string{"team": "vision"}}); err != nil {
		t.Fatal(err)
	}
	rec := worklog.New(e.st, e.st, e.sim, e.clk, nil)
	for range 3 {
		if err := rec.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.clk.Step(20 * time.Minute)
	}
	if err := metering.New(e.st, e.clk, nil).Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/usage?split=label&label=team")
	if status != 200 || !strings.Contains(page, `aria-label="Usage by work"`) {
		t.Fatalf("usage page %d", status)
	}
	rows := regexp.MustCompile(`<tr( class="idle")?><td>([^<]*)</td><td>a</td>`).FindAllStringSubmatch(page, -1)
	var groups []string
	for _, r := range rows {
		groups = append(groups, r[2])
	}
	if !slices.Equal(groups, []string{"vision", "(idle)"}) || !strings.Contains(page, "group_by=label%3Ateam") {
		t.Fatalf("rows %v; want vision and (idle), and a CSV link of the split", groups)
	}
	if status, page, _ := b.get("/console/usage?split=label&label=bad%20key"); status != 400 || !strings.Contains(page, "label key") {
		t.Fatalf("a bad label key: %d", status)
	}
	if status, _, _ := b.get("/console/usage?split=pods"); status != 400 {
		t.Fatalf("a bad split: %d", status)
	}
}

// TestBudgetsOnTheUsagePage: a budget created from the usage page's form
// is listed there with its spend; a bad amount shows the API's reason; an
// alert the checker raised is listed.
func TestBudgetsOnTheUsagePage(t *testing.T) {
	e := newEnv(t)
	e.readyCluster()
	e.clk.Step(time.Hour)
	if err := metering.New(e.st, e.clk, nil).Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	if status, _, _ := b.post("/console/budgets", url.Values{"name": {"ml"}, "amount": {"0.05"}}); status == http.StatusSeeOther {
		t.Fatal("a budget without the CSRF token was created")
	}
	if status, _, _ := b.post("/console/budgets", url.Values{"csrf": {csrf}, "name": {"ml"}, "amount": {"0.05"}}); status != http.StatusSeeOther {
		t.Fatalf("create a budget: %d", status)
	}
	if status, page, _ := b.post("/console/budgets", url.Values{"csrf": {csrf}, "name": {"x"}, "amount": {"lots"}}); status != 400 ||
		!strings.Contains(page, "amount") {
		t.Fatalf("a bad amount: %d", status)
	}
	prices, _ := e.st.ListPrices(t.Context())
	book, _ := billing.NewBook(prices)
	if err := (&budget.Checker{Store: e.st}).Check(t.Context(), book, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	_, page, _ := b.get("/console/usage")
	row := regexp.MustCompile(`<tr><td>ml</td><td>the project</td><td>\$0.05</td><td>\$([0-9.]+)</td>`).FindStringSubmatch(page)
	if row == nil || row[1] == "0.00" || !strings.Contains(page, `id="budget-form"`) {
		t.Fatalf("the budget's row is missing or spent nothing:\n%s", page)
	}
	if !strings.Contains(page, "budget ml: $") || !strings.Contains(page, "<td>spend</td>") {
		t.Fatalf("no alert listed:\n%s", page)
	}
	if !strings.Contains(page, "No reclaim put work at risk this month.") {
		t.Fatalf("the lost-work table is missing or not empty:\n%s", page)
	}
	// A reclaim of a gang's node, its work checkpointed within the notice.
	err := e.st.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.AddLostWork(t.Context(), []domain.LostWork{{NodeID: "n-x", NodeName: "gpu-preemptible-dp-9", ClusterID: "c-x",
			ClusterName: "a", ProjectID: "p", Region: "us-central-2", GPUType: "RTX_6000_PCI", Class: domain.Preemptible,
			Cause: domain.CausePreempted, At: e.clk.Now(), GPUSeconds: 7200, Job: "jobset/ml/train"}}); err != nil {
			return err
		}
		return tx.SaveLostWork(t.Context(), "n-x", e.clk.Now().Add(time.Minute))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, page, _ = b.get("/console/usage")
	if !strings.Contains(page, "<tr><td>jobset/ml/train</td><td>a</td><td>1</td><td>2.00</td><td>$0.890000</td><td>0.00</td></tr>") ||
		!strings.Contains(page, "1 drains put 2.0 GPU-hours of work at risk") {
		t.Fatalf("the reclaim is not in the lost-work table:\n%s", page)
	}
}

// TestLendingPage: the operator's page of a month's lending, linked from
// the fleet page; a project is refused it.
func TestLendingPage(t *testing.T) {
	e := newEnv(t)
	e.readyCluster()
	e.clk.Step(time.Hour)
	if err := metering.New(e.st, e.clk, nil).Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	admin := e.browser()
	admin.signIn(adm)
	if _, page, _ := admin.get("/console/fleet"); !strings.Contains(page, `href="/console/lending"`) {
		t.Fatal("the fleet page does not link the lending page")
	}
	status, page, _ := admin.get("/console/lending")
	row := regexp.MustCompile(`<tr><td>us-central-2</td><td><a [^>]*>RTX_6000_PCI</a></td><td>([0-9.]+)</td><td>([0-9.]+)</td><td>([0-9.]+)</td><td>\$([0-9.]+)</td>`).FindStringSubmatch(page)
	if status != 200 || row == nil || row[1] == "0.0" && row[2] == "0.0" || row[3] == "0.0" || row[4] == "0.00" {
		t.Fatalf("lending page %d, pool row %q:\n%s", status, row, page)
	}
	if status, _, _ := admin.get("/console/lending?month=nov"); status != 400 {
		t.Fatalf("a bad month: %d", status)
	}
	b := e.browser()
	b.signIn(e.tokens["p"])
	if status, _, _ := b.get("/console/lending"); status != 403 {
		t.Fatalf("a project's lending page: %d", status)
	}
}

// TestStoragePage: the operator sees every project's storage against its
// quota, linked from the fleet page; a project sees its own only.
func TestStoragePage(t *testing.T) {
	e := newEnv(t)
	e.readyCluster()
	admin := e.browser()
	admin.signIn(adm)
	if _, page, _ := admin.get("/console/fleet"); !strings.Contains(page, `href="/console/storage"`) {
		t.Fatal("the fleet page does not link the storage page")
	}
	status, page, _ := admin.get("/console/storage")
	if status != 200 || !strings.Contains(page, "<tr><td>p</td><td>") || !strings.Contains(page, "<tr><td>q</td><td>") ||
		!strings.Contains(page, "<td>1.0 GiB</td>") || !strings.Contains(page, "tokens ") {
		t.Fatalf("the operator's storage page %d:\n%s", status, page)
	}
	b := e.browser()
	b.signIn(e.tokens["p"])
	status, page, _ = b.get("/console/storage")
	if status != 200 || !strings.Contains(page, "<tr><td>p</td><td>") || strings.Contains(page, "<tr><td>q</td>") {
		t.Fatalf("a project's storage page %d:\n%s", status, page)
	}
}
