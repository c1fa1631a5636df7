package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/guard"
)

// TestTokenLifecycle: a project names its tokens, lists them (never the
// secret), revokes and rotates them; a revoked, rotated-away or expired
// token fails at once, and a token of another project is out of reach.
func TestTokenLifecycle(t *testing.T) {
	e := newEnv(t)
	var ci apiv1.Token
	e.do("p", "POST", "/v1/tokens", `{"name":"ci","expires_in":"48h"}`, 201, &ci)
	if ci.Token == "" || ci.TokenID == "" || ci.Name != "ci" || ci.ProjectID != "p" || ci.Operator || ci.State != "active" ||
		ci.ExpiresAt == nil || !ci.ExpiresAt.Equal(e.wall.Now().Add(48*time.Hour).Truncate(time.Microsecond)) && ci.ExpiresAt.Sub(e.wall.Now()) != 48*time.Hour {
		t.Fatalf("created %+v", ci)
	}
	e.tokens["ci"] = ci.Token
	e.do("ci", "GET", "/v1/clusters", "", 200, nil)

	var list apiv1.TokenList
	e.do("p", "GET", "/v1/tokens", "", 200, &list)
	if len(list.Tokens) != 2 || list.Tokens[1].TokenID != ci.TokenID {
		t.Fatalf("list %+v", list)
	}
	for _, tok := range list.Tokens {
		if tok.Token != "" {
			t.Fatalf("a list shows a secret: %+v", tok)
		}
	}
	// The admin sees the same list; another project sees neither.
	var adminList apiv1.TokenList
	e.do("admin", "GET", "/v1/admin/projects/p/tokens", "", 200, &adminList)
	if len(adminList.Tokens) != 2 {
		t.Fatalf("admin list %+v", adminList)
	}
	e.apiErr("q", "DELETE", "/v1/tokens/"+ci.TokenID, "", 404)
	e.apiErr("q", "POST", "/v1/tokens/"+ci.TokenID+"/rotate", "", 404)
	e.apiErr("q", "GET", "/v1/admin/projects/p/tokens", "", 403)
	e.do("ci", "GET", "/v1/clusters", "", 200, nil)

	// Rotate: a new secret, same name and lifetime; the old one fails.
	e.wall.Step(time.Hour)
	var rotated apiv1.Token
	e.do("p", "POST", "/v1/tokens/"+ci.TokenID+"/rotate", "", 201, &rotated)
	if rotated.Token == "" || rotated.Token == ci.Token || rotated.TokenID == ci.TokenID || rotated.Name != "ci" ||
		rotated.ExpiresAt == nil || rotated.ExpiresAt.Sub(rotated.CreatedAt) != 48*time.Hour {
		t.Fatalf("rotated %+v", rotated)
	}
	if got := e.apiErr("ci", "GET", "/v1/clusters", "", 401); !strings.Contains(got.Message, "revoked") {
		t.Fatalf("the rotated-away token: %+v", got)
	}
	e.tokens["ci2"] = rotated.Token
	e.do("ci2", "GET", "/v1/clusters", "", 200, nil)
	e.apiErr("p", "POST", "/v1/tokens/"+ci.TokenID+"/rotate", "", 409) // revoked: not again

	// Expiry, by the API's clock.
	e.wall.Step(49 * time.Hour)
	if got := e.apiErr("ci2", "GET", "/v1/clusters", "", 401); !strings.Contains(got.Message, "expired") {
		t.Fatalf("an expired token: %+v", got)
	}

	// Revoke, twice (the same answer), then the token fails.
	var laptop apiv1.Token
	e.do("admin", "POST", "/v1/admin/projects/p/tokens", `{"name":"laptop"}`, 201, &laptop)
	e.tokens["laptop"] = laptop.Token
	e.do("laptop", "GET", "/v1/clusters", "", 200, nil)
	// The operator rotates it: the old secret stops, the new one works.
	var turned apiv1.Token
	e.do("admin", "POST", "/v1/admin/projects/p/tokens/"+laptop.TokenID+"/rotate", "", 201, &turned)
	if turned.Name != "laptop" || turned.Token == "" || turned.Token == laptop.Token {
		t.Fatalf("rotated %+v", turned)
	}
	e.apiErr("laptop", "GET", "/v1/clusters", "", 401)
	e.tokens["laptop"], laptop = turned.Token, turned
	e.do("laptop", "GET", "/v1/clusters", "", 200, nil)
	var revoked apiv1.Token
	e.do("admin", "DELETE", "/v1/admin/projects/p/tokens/"+laptop.TokenID, "", 200, &revoked)
	if revoked.State != "revoked" || revoked.RevokedAt == nil || revoked.Token != "" {
		t.Fatalf("revoked %+v", revoked)
	}
	e.do("admin", "DELETE", "/v1/admin/projects/p/tokens/"+laptop.TokenID, "", 200, nil)
	e.apiErr("laptop", "GET", "/v1/clusters", "", 401)
	e.apiErr("admin", "DELETE", "/v1/admin/projects/q/tokens/"+laptop.TokenID, "", 404) // another project's path

	// A token may revoke itself.
	e.do("p", "DELETE", "/v1/tokens/"+list.Tokens[0].TokenID, "", 200, nil)
	e.apiErr("p", "GET", "/v1/clusters", "", 401)
}

// TestTokenRequestsAreChecked: bad names and expiries are refused, naming
// the field, and create nothing.
func TestTokenRequestsAreChecked(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ body, field string }{
		{`{"name":"has space"}`, "name"},
		{`{"name":"\u001b[31m"}`, "name"},
		{`{"name":"` + strings.Repeat("n", 100) + `"}`, "name"},
		{`{"expires_in":"soon"}`, "expires_in"},
		{`{"expires_in":"1s"}`, "expires_in"},
		{`{"expires_in":"-24h"}`, "expires_in"},
		{`{"expires_in":"100000h"}`, "expires_in"},
		{`{"expires_at":"2001-01-01T00:00:00Z"}`, "expires_at"},
		{`{"expires_in":"24h","expires_at":"2999-01-01T00:00:00Z"}`, "expires_in"},
		{`{"Name":"x"}`, "Name"},
		{`{"name":"a","name":"b"}`, "name"},
		{`{"secret":"mine"}`, "secret"},
	} {
		if got := e.apiErr("p", "POST", "/v1/tokens", tc.body, 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.body, got, tc.field)
		}
	}
	var list apiv1.TokenList
	e.do("p", "GET", "/v1/tokens", "", 200, &list)
	if len(list.Tokens) != 1 {
		t.Fatalf("refused requests made tokens: %+v", list)
	}
	e.apiErr("p", "DELETE", "/v1/tokens/tok-nope", "", 404)
	e.apiErr("admin", "GET", "/v1/admin/projects/ghost/tokens", "", 404)
	e.apiErr("admin", "POST", "/v1/admin/projects/ghost/tokens", "", 404)
	e.apiErr("", "GET", "/v1/tokens", "", 401)
}

// TestOperatorTokens: operators manage their own tokens like projects do,
// so the admin token rotates without a restart; the last active one
// cannot be revoked (nobody could operate the server), and a project
// token never reaches them.
func TestOperatorTokens(t *testing.T) {
	e := newEnv(t)
	var list apiv1.TokenList
	e.do("admin", "GET", "/v1/tokens", "", 200, &list)
	if len(list.Tokens) != 1 || !list.Tokens[0].Operator || list.Tokens[0].ProjectID != "" {
		t.Fatalf("operator tokens %+v", list)
	}
	first := list.Tokens[0]
	if got := e.apiErr("admin", "DELETE", "/v1/tokens/"+first.TokenID, "", 409); !strings.Contains(got.Message, "last active operator token") {
		t.Fatalf("revoking the last operator token: %+v", got)
	}
	var next apiv1.Token
	e.do("admin", "POST", "/v1/tokens/"+first.TokenID+"/rotate", "", 201, &next)
	if !next.Operator || next.Token == "" {
		t.Fatalf("rotated %+v", next)
	}
	e.apiErr("admin", "GET", "/v1/admin/projects", "", 401) // the old one
	e.tokens["admin"] = next.Token
	e.do("admin", "GET", "/v1/admin/projects", "", 200, nil)
	var spare apiv1.Token
	e.do("admin", "POST", "/v1/tokens", `{"name":"spare"}`, 201, &spare)
	e.do("admin", "DELETE", "/v1/tokens/"+next.TokenID, "", 200, nil) // another one is left
	e.tokens["admin"] = spare.Token
	e.do("admin", "GET", "/v1/admin/projects", "", 200, nil)
	e.apiErr("p", "DELETE", "/v1/tokens/"+spare.TokenID, "", 404)
	e.apiErr("p", "GET", "/v1/admin/projects", "", 403)
}

// TestTokenUses: each use is recorded, in batches.
func TestTokenUses(t *testing.T) {
	e := newEnv(t)
	var list apiv1.TokenList
	e.do("p", "GET", "/v1/tokens", "", 200, &list)
	e.wall.Step(time.Minute)
	used := e.wall.Now()
	e.do("p", "GET", "/v1/clusters", "", 200, nil)
	if err := e.api.FlushTokenUses(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.do("p", "GET", "/v1/tokens", "", 200, &list)
	if got := list.Tokens[0].LastUsedAt; got == nil || got.Sub(used).Abs() > time.Millisecond {
		t.Fatalf("last used %v, want %v", got, used)
	}
}

// TestRevokedTokenEndsItsStreams: an event stream opened with a token
// ends once the token is revoked, without waiting for the client.
func TestRevokedTokenEndsItsStreams(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	var tok apiv1.Token
	e.do("p", "POST", "/v1/tokens", `{"name":"watcher"}`, 201, &tok)
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/clusters/"+c.ClusterID+"/events?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
	select {
	case <-ended:
		t.Fatal("the stream ended before the token was revoked")
	case <-time.After(200 * time.Millisecond):
	}
	e.do("p", "DELETE", "/v1/tokens/"+tok.TokenID, "", 200, nil)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a revoked token is still open")
	}
}

// TestTokensPerProjectAreCapped: a project holds at most MaxTokens
// active tokens (each may hold its own share of the server: streams,
// request budget); the next is a 409 naming the limit, and a revoked one
// makes room. Revoked tokens are kept up to keepInactive, the oldest
// deleted first, so minting and revoking in a loop does not grow the
// store; an operator's tokens for the project count the same.
func TestTokensPerProjectAreCapped(t *testing.T) {
	e := newEnvOpts(t, Options{MaxTokens: 3})
	var made []apiv1.Token
	for range 2 { // the project's first token is one of the 3
		var tok apiv1.Token
		e.do("p", "POST", "/v1/tokens", `{"name":"ci"}`, 201, &tok)
		made = append(made, tok)
	}
	if er := e.apiErr("p", "POST", "/v1/tokens", `{"name":"ci"}`, 409); !strings.Contains(er.Message, "3 active tokens") {
		t.Errorf("past the cap: %+v", er)
	}
	e.apiErr("admin", "POST", "/v1/admin/projects/p/tokens", `{"name":"ops"}`, 409)
	// Rotation keeps the count.
	e.do("p", "POST", "/v1/tokens/"+made[0].TokenID+"/rotate", "", 201, nil)
	e.do("p", "DELETE", "/v1/tokens/"+made[1].TokenID, "", 200, nil)
	e.do("p", "POST", "/v1/tokens", `{"name":"ci"}`, 201, nil)
	// Mint and revoke in a loop: what is stored stays bounded.
	for range keepInactive + 20 {
		var tok apiv1.Token
		e.do("p", "POST", "/v1/tokens/"+e.firstActive("p", "ci").TokenID+"/rotate", "", 201, &tok)
	}
	stored, err := e.st.ListTokens(e.ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3+keepInactive {
		t.Errorf("%d tokens stored; want 3 active and the newest %d revoked", len(stored), keepInactive)
	}
	// Another project is not held back.
	e.do("q", "POST", "/v1/tokens", `{"name":"ci"}`, 201, nil)
}

// firstActive is project's first active token named name.
func (e *env) firstActive(project, name string) apiv1.Token {
	e.t.Helper()
	var list apiv1.TokenList
	e.do("admin", "GET", "/v1/admin/projects/"+project+"/tokens", "", 200, &list)
	for _, t := range list.Tokens {
		if t.Name == name && t.State == "active" {
			return t
		}
	}
	e.t.Fatalf("project %s has no active token %s", project, name)
	return apiv1.Token{}
}

// TestTokenMintingIsRateLimited: a project mints (creates or rotates)
// tokens at most as fast as its mint budget allows; past it, a 429 says
// so with Retry-After, and nothing is stored. Another project and an
// operator are not held back.
func TestTokenMintingIsRateLimited(t *testing.T) {
	e := newEnvOpts(t, Options{TokenMints: guard.NewLimiter(1.0/60, 2)})
	e.do("p", "POST", "/v1/tokens", `{"name":"a"}`, 201, nil)
	e.do("p", "POST", "/v1/tokens/"+e.firstActive("p", "a").TokenID+"/rotate", "", 201, nil)
	before, _ := e.st.ListTokens(e.ctx, "p")
	er := e.apiErr("p", "POST", "/v1/tokens", `{"name":"b"}`, 429)
	if !strings.Contains(er.Message, "tokens") {
		t.Errorf("refusal: %+v", er)
	}
	e.apiErr("p", "POST", "/v1/tokens/"+e.firstActive("p", "a").TokenID+"/rotate", "", 429)
	if after, _ := e.st.ListTokens(e.ctx, "p"); len(after) != len(before) {
		t.Errorf("a refused mint stored a token: %d then %d", len(before), len(after))
	}
	e.do("q", "POST", "/v1/tokens", `{"name":"b"}`, 201, nil)
	e.do("admin", "POST", "/v1/admin/projects/p/tokens", `{"name":"ops"}`, 201, nil)
}
