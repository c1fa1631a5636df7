// Package random is the seeded random source sparecap's own decisions
// draw from: the jitter of retries and the identifiers of what it
// creates. A run made with a known seed (a property test, a simulation)
// draws the same numbers again; a server seeds it from the operating
// system's entropy. Secrets (tokens, keys) never come from here: they come
// from crypto/rand.
package random

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"
)

// Source is a seeded source, safe for concurrent use.
type Source struct {
	seed uint64
	mu   sync.Mutex
	r    *rand.Rand
}

// New returns a source seeded with seed.
func New(seed uint64) *Source {
	return &Source{seed: seed, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// FromEntropy returns a source seeded from the operating system.
func FromEntropy() *Source {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return New(binary.LittleEndian.Uint64(b[:]))
}

// Seed is what the source was seeded with: log it to replay a run.
func (s *Source) Seed() uint64 { return s.seed }

// Duration returns a duration in [0, d] (0 for d <= 0).
func (s *Source) Duration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.r.Int64N(int64(d) + 1))
}

// ID returns prefix followed by 12 random hex digits.
func (s *Source) ID(prefix string) string {
	var b [6]byte
	s.mu.Lock()
	v := s.r.Uint64()
	s.mu.Unlock()
	binary.LittleEndian.PutUint32(b[:4], uint32(v))
	binary.LittleEndian.PutUint16(b[4:], uint16(v>>32))
	return prefix + hex.EncodeToString(b[:])
}
