package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

var secretRE = regexp.MustCompile(`id="new-token-secret">([^<]+)<`)

// TestTokensPage: a signed-in project lists, creates, rotates and revokes
// its tokens in the console; a new secret is shown once; rotating the
// session's own token keeps the session (on the new token), and a token
// revoked elsewhere ends the sessions signed in with it.
func TestTokensPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/tokens")
	if status != 200 || !strings.Contains(page, "this session") || strings.Contains(page, e.tokens["p"]) {
		t.Fatalf("tokens page: %d\n%s", status, page)
	}

	status, page, _ = b.post("/console/tokens", url.Values{"csrf": {csrf}, "name": {"ci"}, "expires_days": {"7"}})
	m := secretRE.FindStringSubmatch(page)
	if status != http.StatusCreated || m == nil {
		t.Fatalf("create: %d\n%s", status, page)
	}
	e.apiAs(m[1], "GET", "/v1/clusters", "", 200)
	if _, again, _ := b.get("/console/tokens"); strings.Contains(again, m[1]) {
		t.Fatal("the secret is shown again")
	}
	for _, bad := range []url.Values{{"name": {"has space"}, "expires_days": {"7"}}, {"name": {"x"}, "expires_days": {"3"}}} {
		bad.Set("csrf", csrf)
		if status, page, _ := b.post("/console/tokens", bad); status != http.StatusBadRequest || !strings.Contains(page, `aria-invalid="true"`) {
			t.Errorf("%v: %d", bad, status)
		}
	}

	// Rotate this session's own token: still signed in, on the new one.
	var who apiv1.WhoAmI
	json.Unmarshal([]byte(e.apiAs(e.tokens["p"], "GET", "/v1/whoami", "", 200)), &who)
	status, page, _ = b.post("/console/tokens/"+who.TokenID+"/rotate", url.Values{"csrf": {csrf}})
	m = secretRE.FindStringSubmatch(page)
	if status != http.StatusCreated || m == nil {
		t.Fatalf("rotate: %d\n%s", status, page)
	}
	e.apiAs(e.tokens["p"], "GET", "/v1/clusters", "", 401)
	if status, _, _ := b.get("/console/"); status != 200 {
		t.Fatalf("the session did not follow its rotated token: %d", status)
	}

	// Revoked through the API: the session ends at its next page.
	json.Unmarshal([]byte(e.apiAs(m[1], "GET", "/v1/whoami", "", 200)), &who)
	e.apiAs(m[1], "DELETE", "/v1/tokens/"+who.TokenID, "", 200)
	status, _, h := b.get("/console/usage")
	if status != http.StatusFound || !strings.Contains(h.Get("Location"), "ended=1") {
		t.Fatalf("a page after the token was revoked: %d %s", status, h.Get("Location"))
	}
	if status, _, h := b.get("/console/"); status != http.StatusFound || !strings.HasPrefix(h.Get("Location"), "/console/login") {
		t.Fatalf("the ended session still works: %d %s", status, h.Get("Location"))
	}
}

// TestRevokeFromTheConsole: the Revoke button revokes the token. (The
// console's in-process calls once sent a DELETE without a body, which a
// real server never hands a handler, and the API's handler crashed on it.)
func TestRevokeFromTheConsole(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	var tok apiv1.Token
	if err := json.Unmarshal([]byte(e.apiAs(e.tokens["p"], "POST", "/v1/tokens", `{"name":"laptop"}`, 201)), &tok); err != nil {
		t.Fatal(err)
	}
	status, _, h := b.post("/console/tokens/"+tok.TokenID+"/revoke", url.Values{"csrf": {csrf}})
	if status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "revoked") {
		t.Fatalf("revoke: %d %s", status, h.Get("Location"))
	}
	e.apiAs(tok.Token, "GET", "/v1/clusters", "", 401)
}
