package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var (
	webhookSecretRE = regexp.MustCompile(`id="new-secret-value">(whsec_[^<]+)<`)
	webhookIDRE     = regexp.MustCompile(`<code>(wh-[0-9a-f]+)</code> · project`)
)

// TestWebhooksPages: a project registers an endpoint in the console (the
// API's field errors next to the fields, nothing made), sees its secret
// once, sends a test, disables and enables it, rotates its secret and
// deletes it; another project cannot reach it; an operator picks the
// project.
func TestWebhooksPages(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/webhooks")
	if status != 200 || !strings.Contains(page, "No endpoints yet.") || !strings.Contains(page, `value="PreemptionNotified"`) {
		t.Fatalf("webhooks page: %d\n%s", status, page)
	}

	// A private address: refused, the message next to the URL, the form kept.
	form := url.Values{"csrf": {csrf}, "name": {"ray"}, "url": {"http://10.0.0.7/hook"}, "event_types": {"PreemptionNotified", "NodeRemoved"}, "enabled": {"on"}}
	status, page, _ = b.post("/console/webhooks", form)
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-url"`) || !strings.Contains(page, "10.0.0.7 is a private address") ||
		!strings.Contains(page, `value="ray"`) || !regexp.MustCompile(`value="NodeRemoved" checked`).MatchString(page) {
		t.Fatalf("a refused URL: %d\n%s", status, page)
	}
	if list := e.apiAs(e.tokens["p"], "GET", "/v1/webhooks", "", 200); strings.Contains(list, "ray") {
		t.Fatalf("a refused form made an endpoint: %s", list)
	}

	form.Set("url", "https://ray.example.com/hook")
	status, page, _ = b.post("/console/webhooks", form)
	m, id := webhookSecretRE.FindStringSubmatch(page), webhookIDRE.FindStringSubmatch(page)
	if status != http.StatusCreated || m == nil || id == nil || !strings.Contains(page, "PreemptionNotified, NodeRemoved") {
		t.Fatalf("create: %d\n%s", status, page)
	}
	endpoint := "/console/webhooks/" + id[1]
	if _, again, _ := b.get(endpoint); strings.Contains(again, m[1]) || strings.Contains(again, "new-secret") {
		t.Fatal("the secret is shown again")
	}
	if _, list, _ := b.get("/console/webhooks"); !strings.Contains(list, `href="`+endpoint+`"`) {
		t.Fatalf("the list does not link the endpoint:\n%s", list)
	}

	// A test: a pending delivery of type dev.sparecap.Test.
	status, _, h := b.post(endpoint+"/test", url.Values{"csrf": {csrf}})
	if status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "flash=Test") {
		t.Fatalf("test: %d %s", status, h.Get("Location"))
	}
	_, page, _ = b.get(h.Get("Location"))
	if !strings.Contains(page, "dev.sparecap.Test") || !strings.Contains(page, `class="delivery-pending"`) || !strings.Contains(page, "sent; reload") {
		t.Fatalf("after a test:\n%s", page)
	}

	// Disable, enable.
	if status, _, _ := b.post(endpoint+"/disable", url.Values{"csrf": {csrf}}); status != http.StatusSeeOther {
		t.Fatalf("disable: %d", status)
	}
	if _, page, _ = b.get(endpoint); !strings.Contains(page, `id="endpoint-enabled">disabled`) || !strings.Contains(page, `id="enable"`) {
		t.Fatalf("disabled:\n%s", page)
	}
	b.post(endpoint+"/enable", url.Values{"csrf": {csrf}})
	if _, page, _ = b.get(endpoint); !strings.Contains(page, `id="endpoint-enabled">enabled`) {
		t.Fatalf("enabled again:\n%s", page)
	}

	// Rotate: a new secret, shown once, the previous one still signing.
	status, page, _ = b.post(endpoint+"/rotate", url.Values{"csrf": {csrf}})
	r := webhookSecretRE.FindStringSubmatch(page)
	if status != http.StatusOK || r == nil || r[1] == m[1] || !strings.Contains(page, "The previous secret keeps signing") {
		t.Fatalf("rotate: %d\n%s", status, page)
	}

	// Another project: not found.
	q := e.browser()
	qcsrf := q.signIn(e.tokens["q"])
	if status, _, _ := q.get(endpoint); status != http.StatusNotFound {
		t.Errorf("q opens p's endpoint: %d", status)
	}
	if status, _, _ := q.post(endpoint+"/delete", url.Values{"csrf": {qcsrf}}); status != http.StatusNotFound {
		t.Errorf("q deletes p's endpoint: %d", status)
	}
	if status, _, _ := b.post(endpoint+"/test", url.Values{"csrf": {"forged"}}); status != http.StatusForbidden {
		t.Errorf("a form without the session's CSRF token: %d", status)
	}

	// The operator picks the project.
	a := e.browser()
	acsrf := a.signIn(e.tokens["admin"])
	_, page, _ = a.get("/console/webhooks")
	if !strings.Contains(page, `id="project-form"`) || strings.Contains(page, `id="webhooks"`) {
		t.Fatalf("the operator's page before picking a project:\n%s", page)
	}
	_, page, _ = a.get("/console/webhooks?project=p")
	if !strings.Contains(page, `href="`+endpoint+`?project=p"`) {
		t.Fatalf("the operator's page of p:\n%s", page)
	}
	status, page, _ = a.post("/console/webhooks?project=q", url.Values{"csrf": {acsrf}, "name": {"sky"}, "url": {"https://sky.example.com/"}, "enabled": {"on"}})
	if status != http.StatusCreated || !strings.Contains(page, "project q") {
		t.Fatalf("the operator creates q's endpoint: %d\n%s", status, page)
	}

	// Delete.
	status, _, h = b.post(endpoint+"/delete", url.Values{"csrf": {csrf}})
	if status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "deleted") {
		t.Fatalf("delete: %d %s", status, h.Get("Location"))
	}
	if _, page, _ = b.get("/console/webhooks"); !strings.Contains(page, "No endpoints yet.") {
		t.Fatalf("after delete:\n%s", page)
	}
}
