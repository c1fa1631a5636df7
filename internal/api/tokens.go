package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/guard"
	"github.com/sparecap/sparecap/internal/store"
)

// Tokens: every token, a project's or an operator's, lives in the store
// with an ID, a name, an optional expiry and a revocation time. A request
// authenticates by the token's hash; a revoked or expired token fails on
// every server at once, as each looks it up on each request. The secret is
// shown once, in the answer that made it.

// MinOperatorTokenLen is the shortest operator token accepted from outside
// (SPARECAP_ADMIN_TOKEN): the ones the server makes are 67 characters.
const MinOperatorTokenLen = 32

// maxTokenLife bounds an expiry: longer than this is "never", said so.
const maxTokenLife = 10 * 365 * 24 * time.Hour

// keepInactive is how many of a project's revoked or expired tokens are
// kept (listed, and named as revoked when one is used); older ones are
// deleted as new tokens are minted, so minting and revoking in a loop
// does not grow the store.
const keepInactive = 100

func newTokenID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "tok-" + hex.EncodeToString(b[:])
}

// newToken makes a token of scope (a project, or "" for an operator
// token), returning it and its secret.
func newToken(scope, name string, now, expires time.Time) (domain.Token, string) {
	secret := NewToken()
	return domain.Token{ID: newTokenID(), Hash: HashToken(secret), ProjectID: scope, Name: name,
		CreatedAt: now, ExpiresAt: expires}, secret
}

func tokenView(t domain.Token, now time.Time, secret string) apiv1.Token {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return apiv1.Token{TokenID: t.ID, Name: t.Name, ProjectID: t.ProjectID, Operator: t.Operator(),
		State: t.State(now), CreatedAt: t.CreatedAt, ExpiresAt: opt(t.ExpiresAt), RevokedAt: opt(t.RevokedAt),
		LastUsedAt: opt(t.LastUsedAt), Token: secret}
}

// decodeTokenRequest reads a token request; an empty body is a token
// named "token" that never expires.
func decodeTokenRequest(r io.Reader, now time.Time) (name string, expires time.Time, err error) {
	data, err := readBody(r)
	if err != nil {
		return "", time.Time{}, err
	}
	var req apiv1.CreateTokenRequest
	if len(data) > 0 {
		if err := decodeStrict(bytesReader(data), &req); err != nil {
			return "", time.Time{}, err
		}
	}
	name = req.Name
	if name == "" {
		name = "token"
	}
	if !domain.ValidName(name) {
		return "", time.Time{}, invalid("name", "name %s is not valid: 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", quoteShort(name))
	}
	switch {
	case req.ExpiresIn != "" && req.ExpiresAt != nil:
		return "", time.Time{}, invalid("expires_in", "set expires_in or expires_at, not both")
	case req.ExpiresIn != "":
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d < time.Minute || d > maxTokenLife {
			return "", time.Time{}, invalid("expires_in", "expires_in %s must be a duration from 1m to %dh (e.g. 720h); leave it out for a token that does not expire", quoteShort(req.ExpiresIn), int(maxTokenLife.Hours()))
		}
		expires = now.Add(d)
	case req.ExpiresAt != nil:
		if !req.ExpiresAt.After(now) || req.ExpiresAt.Sub(now) > maxTokenLife {
			return "", time.Time{}, invalid("expires_at", "expires_at %s must be in the future, within %d years", req.ExpiresAt.Format(time.RFC3339), int(maxTokenLife.Hours()/24/365))
		}
		expires = req.ExpiresAt.UTC()
	}
	return name, expires, nil
}

// scopeOf is the token scope a request manages: the caller's own on
// /v1/tokens (its project, or the operator tokens for an operator), the
// named project's on /v1/admin/projects/{id}/tokens.
func scopeOf(r *http.Request, p principal) string {
	if id := r.PathValue("project"); id != "" {
		return id
	}
	if p.admin {
		return ""
	}
	return p.project
}

// checkScope makes sure the project of scope exists.
func (s *Server) checkScope(ctx context.Context, tx store.Tx, scope string) error {
	if scope == "" {
		return nil
	}
	if _, err := tx.GetProject(ctx, scope); errors.Is(err, domain.ErrNotFound) {
		return notFound("project %q not found", scope)
	} else {
		return err
	}
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, p principal) {
	scope := scopeOf(r, p)
	if scope != "" {
		if _, err := s.store.GetProject(r.Context(), scope); errors.Is(err, domain.ErrNotFound) {
			s.fail(w, r, notFound("project %q not found", scope))
			return
		}
	}
	ts, err := s.store.ListTokens(r.Context(), scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	out := apiv1.TokenList{Tokens: make([]apiv1.Token, 0, len(ts))}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, tokenView(t, now, ""))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	now := s.wall.Now()
	name, expires, err := decodeTokenRequest(r.Body, now)
	if err == nil {
		err = s.mintAllowed(w, p)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scope := scopeOf(r, p)
	tok, secret := newToken(scope, name, now, expires)
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if err := s.checkScope(ctx, tx, scope); err != nil {
			return err
		}
		if err := s.roomForToken(ctx, tx, scope, now); err != nil {
			return err
		}
		if err := tx.CreateToken(ctx, tok); err != nil {
			return err
		}
		return pruneInactive(ctx, tx, scope, now)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("token created", "token", tok.ID, "name", tok.Name, "project", scope, "operator", scope == "", "by", p.tokenID)
	writeJSON(w, http.StatusCreated, tokenView(tok, now, secret))
}

// mintAllowed takes one mint from a project's budget (TokenMints), or
// says how long to wait. An operator's mints are not counted.
func (s *Server) mintAllowed(w http.ResponseWriter, p principal) error {
	if p.admin {
		return nil
	}
	return allowOne(w, s.TokenMints, p.project, "minting tokens faster than it may (creating or rotating one)")
}

// allowOne takes one of project's writes from l, or sets Retry-After and
// says the project is doing what (too fast). A nil l allows everything.
func allowOne(w http.ResponseWriter, l *guard.Limiter, project, what string) error {
	if ok, wait := l.Allow(project); !ok {
		w.Header().Set("Retry-After", guard.RetryAfter(wait))
		return rateLimited("project %s is %s; retry in %s s", project, what, guard.RetryAfter(wait))
	}
	return nil
}

// roomForToken refuses a project's token past MaxTokens active ones: each
// token carries its own share of the server (a request budget, event
// streams), so their number is the project's share.
func (s *Server) roomForToken(ctx context.Context, tx store.Tx, scope string, now time.Time) error {
	if scope == "" || s.MaxTokens <= 0 {
		return nil
	}
	ts, err := tx.ListTokens(ctx, scope)
	if err != nil {
		return err
	}
	active := 0
	for _, t := range ts {
		if t.State(now) == domain.TokenActive {
			active++
		}
	}
	if active >= s.MaxTokens {
		return conflict("project %s has %d active tokens, the most it may; revoke one first (DELETE /v1/tokens/{id})", scope, active)
	}
	return nil
}

// pruneInactive deletes a project's revoked or expired tokens beyond the
// newest keepInactive.
func pruneInactive(ctx context.Context, tx store.Tx, scope string, now time.Time) error {
	if scope == "" {
		return nil // operator tokens are few, and kept
	}
	ts, err := tx.ListTokens(ctx, scope) // oldest first
	if err != nil {
		return err
	}
	var inactive []domain.Token
	for _, t := range ts {
		if t.State(now) != domain.TokenActive {
			inactive = append(inactive, t)
		}
	}
	for _, t := range inactive[:max(len(inactive)-keepInactive, 0)] {
		if err := tx.DeleteToken(ctx, t.ID); err != nil {
			return err
		}
	}
	return nil
}

// tokenIn reads token id of scope in tx: 404 for one of another scope,
// as for one that does not exist.
func tokenIn(ctx context.Context, tx store.Tx, scope, id string) (domain.Token, error) {
	t, err := tx.GetToken(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && t.ProjectID != scope) {
		return domain.Token{}, notFound("token %q not found", id)
	}
	return t, err
}

// lastOperator refuses to leave no active operator token but t's
// replacement: revoking the last one would lock every operator out.
func lastOperator(ctx context.Context, tx store.Tx, t domain.Token, now time.Time) error {
	if !t.Operator() {
		return nil
	}
	ts, err := tx.ListTokens(ctx, "")
	if err != nil {
		return err
	}
	for _, o := range ts {
		if o.ID != t.ID && o.State(now) == domain.TokenActive {
			return nil
		}
	}
	return conflict("token %s is the last active operator token; create another (or rotate this one) before revoking it", t.ID)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	if err := decodeEmpty(r.Body); err != nil {
		s.fail(w, r, err)
		return
	}
	scope, id, now := scopeOf(r, p), r.PathValue("token"), s.wall.Now()
	var tok domain.Token
	err := s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if tok, err = tokenIn(ctx, tx, scope, id); err != nil || !tok.RevokedAt.IsZero() {
			return err // revoking twice changes nothing
		}
		if tok.State(now) == domain.TokenActive {
			if err := lastOperator(ctx, tx, tok, now); err != nil {
				return err
			}
		}
		tok.RevokedAt = now
		return tx.UpdateToken(ctx, tok)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("token revoked", "token", tok.ID, "name", tok.Name, "project", scope, "operator", scope == "", "by", p.tokenID)
	writeJSON(w, http.StatusOK, tokenView(tok, now, ""))
}

// rotateToken replaces a token by a new one with the same name, scope and
// lifetime, revoking the old one in the same transaction.
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	err := decodeEmpty(r.Body)
	if err == nil {
		err = s.mintAllowed(w, p)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scope, id, now := scopeOf(r, p), r.PathValue("token"), s.wall.Now()
	var old, tok domain.Token
	var secret string
	err = s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if old, err = tokenIn(ctx, tx, scope, id); err != nil {
			return err
		}
		if st := old.State(now); st != domain.TokenActive {
			return conflict("token %s is %s; create a new token instead", id, st)
		}
		var expires time.Time
		if !old.ExpiresAt.IsZero() {
			expires = now.Add(old.ExpiresAt.Sub(old.CreatedAt))
		}
		tok, secret = newToken(scope, old.Name, now, expires)
		if err := tx.CreateToken(ctx, tok); err != nil {
			return err
		}
		old.RevokedAt = now
		if err := tx.UpdateToken(ctx, old); err != nil {
			return err
		}
		return pruneInactive(ctx, tx, scope, now)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("token rotated", "token", old.ID, "new", tok.ID, "name", tok.Name, "project", scope, "operator", scope == "", "by", p.tokenID)
	writeJSON(w, http.StatusCreated, tokenView(tok, now, secret))
}

// BootstrapOperator makes token an operator token unless the store has an
// active one already: SPARECAP_ADMIN_TOKEN (or the generated one) only
// starts things off; operators then rotate their tokens through the API.
// It reports whether token is an active operator token afterwards. A
// token shorter than MinOperatorTokenLen is refused: it could be guessed.
func BootstrapOperator(ctx context.Context, st store.Store, token string, now time.Time) (active bool, err error) {
	if len(token) < MinOperatorTokenLen {
		return false, fmt.Errorf("the admin token must be at least %d characters (it has %d); generate one with: openssl rand -hex 32", MinOperatorTokenLen, len(token))
	}
	if len(token) > MaxTokenLen {
		return false, fmt.Errorf("the admin token must be at most %d characters", MaxTokenLen)
	}
	hash := HashToken(token)
	// Any server may start things off, leader or not.
	ctx = store.WithoutEpoch(ctx)
	for attempt := 0; ; attempt++ {
		err = st.Update(ctx, func(tx store.Tx) error {
			active = false
			if t, err := tx.TokenByHash(ctx, hash); err == nil {
				active = t.Operator() && t.State(now) == domain.TokenActive
				return nil
			} else if !errors.Is(err, domain.ErrNotFound) {
				return err
			}
			ts, err := tx.ListTokens(ctx, "")
			if err != nil {
				return err
			}
			for _, t := range ts {
				if t.State(now) == domain.TokenActive {
					return nil // operators have their tokens: this one is not among them
				}
			}
			active = true
			return tx.CreateToken(ctx, domain.Token{ID: newTokenID(), Hash: hash, Name: "bootstrap", CreatedAt: now})
		})
		// Two servers starting together: the loser finds the winner's.
		if errors.Is(err, domain.ErrConflict) && attempt < 3 {
			continue
		}
		return active, err
	}
}

// usage records token uses in memory, to be written in batches (see
// FlushTokenUses): a write per request would double the cost of a read.
type usage struct {
	mu   sync.Mutex
	used map[string]time.Time
}

func (u *usage) note(hash string, at time.Time) {
	u.mu.Lock()
	if u.used == nil {
		u.used = map[string]time.Time{}
	}
	u.used[hash] = at
	u.mu.Unlock()
}

func (u *usage) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.used
	u.used = nil
	return m
}

// FlushTokenUses writes the token uses seen since the last flush. The
// server calls it every few seconds and on shutdown.
func (s *Server) FlushTokenUses(ctx context.Context) error {
	used := s.uses.take()
	if len(used) == 0 {
		return nil
	}
	if err := s.store.TouchTokens(ctx, used); err != nil {
		// Not worth a retry loop: the next use records it again.
		return err
	}
	return nil
}

// RunTokenUses flushes token uses every interval until ctx ends, then
// once more.
func (s *Server) RunTokenUses(ctx context.Context, interval time.Duration) {
	for {
		select {
		case <-ctx.Done():
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := s.FlushTokenUses(flush); err != nil {
				s.log.Warn("record token uses", "err", err)
			}
			cancel()
			return
		case <-s.realClock.After(interval):
			if err := s.FlushTokenUses(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("record token uses", "err", err)
			}
		}
	}
}

// tokenState says why a stored token no longer works, or "" if it does.
func tokenState(t domain.Token, now time.Time) string {
	switch t.State(now) {
	case domain.TokenRevoked:
		return "token revoked"
	case domain.TokenExpired:
		return "token expired at " + t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return ""
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// quoteShort quotes s for an error message, ASCII only, cut at 80 bytes.
func quoteShort(s string) string { return strconv.QuoteToASCII(truncate(s, 80)) }
