package backoff

import (
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/random"
)

// Keyed remembers the failures of many independent retries (a node's
// step, a node's cleanup) by key, in memory: after a restart everything
// is tried at once. Safe for concurrent use.
type Keyed struct {
	policy Policy
	random *random.Source
	mu     sync.Mutex
	keys   map[string]state
}

type state struct {
	fails    int
	failedAt time.Time
	at       time.Time
	err      error
}

// NewKeyed returns an empty Keyed drawing its jitter from r.
func NewKeyed(p Policy, r *random.Source) *Keyed {
	return &Keyed{policy: p, random: r, keys: map[string]state{}}
}

// Retry is a failed run's backoff: it failed at FailedAt and may run
// again from At. Zero: it has not failed since it last succeeded.
type Retry struct {
	FailedAt, At time.Time
}

// Retry is key's backoff.
func (k *Keyed) Retry(key string) Retry {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.keys[key]
	if !ok {
		return Retry{}
	}
	return Retry{FailedAt: s.failedAt, At: s.at}
}

// Err is the error of key's last failed run, nil if it has not failed
// since it last succeeded.
func (k *Keyed) Err(key string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[key].err
}

// Fail records that key's run failed at now with err: its next run waits
// the policy's gap for one more failure in a row.
func (k *Keyed) Fail(key string, now time.Time, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.keys[key]
	s.fails++
	s.failedAt, s.at, s.err = now, now.Add(k.policy.Gap(s.fails, k.random)), err
	k.keys[key] = s
}

// OK records that key's run succeeded: its failures are forgotten.
func (k *Keyed) OK(key string) {
	k.mu.Lock()
	delete(k.keys, key)
	k.mu.Unlock()
}
