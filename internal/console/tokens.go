package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// tokensPage is what the tokens page shows: the session's scope's tokens
// (its project's, or the operator tokens), and a secret just made, shown
// this once.
type tokensPage struct {
	Tokens  []apiv1.Token
	Current string // the session's own token
	New     *apiv1.Token
	Values  map[string]string
	Errors  map[string]string
}

// expiryChoices are the lifetimes the form offers, in days (0: never).
var expiryChoices = []int{0, 1, 7, 30, 90, 365}

func (c *Console) renderTokens(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client, status int, p tokensPage, msg string) {
	list, err := calls.ListTokens(r.Context(), client.TokenScope{})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	p.Tokens, p.Current = list.Tokens, s.tokenID
	if p.Values == nil {
		p.Values = map[string]string{"name": "", "expires_days": "90"}
	}
	c.render(w, status, "tokens", view{Title: "Tokens", Nav: "tokens", Data: p, Error: msg, Flash: r.URL.Query().Get("flash")}, s)
}

func (c *Console) tokens(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	c.renderTokens(w, r, s, calls, http.StatusOK, tokensPage{}, "")
}

func (c *Console) createToken(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	values := map[string]string{"name": r.PostFormValue("name"), "expires_days": r.PostFormValue("expires_days")}
	errs := map[string]string{}
	req := apiv1.CreateTokenRequest{Name: values["name"]}
	days, err := strconv.Atoi(values["expires_days"])
	valid := false
	for _, d := range expiryChoices {
		valid = valid || (err == nil && d == days)
	}
	switch {
	case !valid:
		errs["expires_days"] = "Choose how long the token lasts."
	case days > 0:
		req.ExpiresIn = strconv.Itoa(24*days) + "h"
	}
	if len(errs) == 0 {
		tok, err := calls.NewToken(r.Context(), client.TokenScope{}, req)
		if err == nil {
			c.renderTokens(w, r, s, calls, http.StatusCreated, tokensPage{New: tok}, "")
			return
		}
		msg, ok := fieldError(err, errs)
		if !ok {
			c.apiFailure(w, s, err)
			return
		}
		c.renderTokens(w, r, s, calls, statusOf(err), tokensPage{Values: values, Errors: errs}, msg)
		return
	}
	c.renderTokens(w, r, s, calls, http.StatusBadRequest, tokensPage{Values: values, Errors: errs}, "")
}

func (c *Console) revokeToken(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	tok, err := calls.RevokeToken(r.Context(), client.TokenScope{}, r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	// Revoking the session's own token ends the session at the next page.
	http.Redirect(w, r, "/console/tokens?flash="+url.QueryEscape("Token "+tok.Name+" ("+tok.TokenID+") revoked"), http.StatusSeeOther)
}

func (c *Console) rotateToken(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	id := r.PathValue("id")
	tok, err := calls.RotateToken(r.Context(), client.TokenScope{}, id)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	if id == s.tokenID {
		// The session's own token: the session follows it.
		if ck, err := r.Cookie(api.SessionCookie); err == nil {
			c.sessions.replaceToken(ck.Value, tok.Token, tok.TokenID)
			s.token, s.tokenID = tok.Token, tok.TokenID
		}
		calls = c.client(tok.Token)
	}
	c.renderTokens(w, r, s, calls, http.StatusCreated, tokensPage{New: tok}, "")
}
