package console

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
)

// SessionTTL is how long a console session lasts without use.
const SessionTTL = 12 * time.Hour

type session struct {
	token   string
	tokenID string // the token's ID, to follow it when it is rotated here
	csrf    string
	admin   bool
	project string
	expires time.Time
}

// Sessions keeps console sessions in memory: a restart signs everyone out,
// which is the safe failure. The token a session holds never leaves the
// server; the browser only has the session ID in an HTTP-only cookie.
type Sessions struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]*session
}

// NewSessions returns an empty session store on wall, a wall clock
// (session expiry is about people, not simulated time).
func NewSessions(wall clock.Clock) *Sessions {
	return &Sessions{clock: wall, m: map[string]*session{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func (s *Sessions) create(token, tokenID string, admin bool, project string) (id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id = randomHex(32)
	sess = &session{token: token, tokenID: tokenID, csrf: randomHex(32), admin: admin, project: project, expires: s.clock.Now().Add(SessionTTL)}
	s.m[id] = sess
	return id, sess
}

func (s *Sessions) get(id string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok {
		return nil, false
	}
	now := s.clock.Now()
	if now.After(sess.expires) {
		delete(s.m, id)
		return nil, false
	}
	sess.expires = now.Add(SessionTTL)
	return sess, true
}

// replaceToken moves the session id to a new token (its own, rotated).
func (s *Sessions) replaceToken(id, token, tokenID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.m[id]; ok {
		sess.token, sess.tokenID = token, tokenID
	}
}

func (s *Sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// Lookup implements api.Sessions.
func (s *Sessions) Lookup(id string) (token, csrf string, ok bool) {
	sess, ok := s.get(id)
	if !ok {
		return "", "", false
	}
	return sess.token, sess.csrf, true
}
