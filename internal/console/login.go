package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/client"
)

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
