package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestTokensCommands: each tokens command sends its request to the
// caller's scope, or with --project-id to that project's, and prints what
// a person needs (the secret once, with the warning).
func TestTokensCommands(t *testing.T) {
	exp := t0.Add(720 * time.Hour)
	made := apiv1.Token{TokenID: "tok-1", Name: "ci", ProjectID: "p1", State: "active", CreatedAt: t0, ExpiresAt: &exp, Token: "sc_secret"}
	f := newFakeAPI(t)
	f.handle("GET /v1/tokens", 200, apiv1.TokenList{Tokens: []apiv1.Token{{TokenID: "tok-0", Name: "token", State: "revoked", CreatedAt: t0.Add(-time.Hour)}, func() apiv1.Token { m := made; m.Token = ""; return m }()}})
	f.handle("POST /v1/tokens", 201, made)
	f.handle("DELETE /v1/tokens/tok-1", 200, apiv1.Token{TokenID: "tok-1", Name: "ci", State: "revoked"})
	f.handle("POST /v1/tokens/tok-1/rotate", 201, apiv1.Token{TokenID: "tok-2", Name: "ci", State: "active", Token: "sc_rotated"})
	f.handle("GET /v1/admin/projects/team-ml/tokens", 200, apiv1.TokenList{Tokens: []apiv1.Token{}})

	r := f.run("tokens", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "" +
		"ID      NAME    STATE     CREATED               EXPIRES               LAST_USED\n" +
		"tok-0   token   revoked   2025-03-04 09:00:00   never                 never\n" +
		"tok-1   ci      active    2025-03-04 10:00:00   2025-04-03 10:00:00   never\n"
	if r.stdout != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.stdout, want)
	}

	r = f.run("tokens", "create", "--name", "ci", "--expires-in", "720h")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "tok-1", "sc_secret")
	mustContain(t, "stderr", r.stderr, "shown only once")
	body := f.only("POST", "/v1/tokens")[0].Body
	if body["name"] != "ci" || body["expires_in"] != "720h" {
		t.Errorf("create sent %v", body)
	}
	r = f.run("tokens", "create", "--expires-at", "2027-06-30T00:00:00Z", "-o", "json")
	var got apiv1.Token
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Token != "sc_secret" {
		t.Fatalf("create -o json: %q %v", r.stdout, err)
	}
	if body := f.only("POST", "/v1/tokens")[1].Body; body["expires_at"] != "2027-06-30T00:00:00Z" {
		t.Errorf("create sent %v", body)
	}
	if r := f.run("tokens", "create", "--expires-at", "tomorrow"); r.err == nil || !strings.Contains(r.stderr, "--expires-at") {
		t.Errorf("a bad --expires-at: %v %s", r.err, r.stderr)
	}

	r = f.run("tokens", "rotate", "tok-1")
	mustContain(t, "stdout", r.stdout, "tok-2", "sc_rotated")
	r = f.run("tokens", "revoke", "tok-1")
	mustContain(t, "stdout", r.stdout, "revoked")
	if r := f.run("tokens", "list", "--project-id", "team-ml"); r.err != nil || len(f.only("GET", "/v1/admin/projects/team-ml/tokens")) != 1 {
		t.Errorf("list --project-id: %v", r.err)
	}
	if n := len(f.requests()); n != 6 {
		t.Errorf("%d requests, want 6 (a bad flag sends none)", n)
	}
}
