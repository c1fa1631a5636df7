// Package clock is the only place sparecap reads the wall clock. Everything
// else takes a Clock, so tests step a Fake and demos run a Scaled clock that
// runs N times faster than real time.
package clock

import (
	"math"
	"sync"
	"time"
)

// Clock tells the time and sleeps on that time scale.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d of this clock's time has
	// passed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now().UTC() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Scaled runs Speed times faster than the wall clock, starting from the wall
// time at which it was made.
//
// It re-anchors itself as it goes (every reanchorEvery of real time): the
// scaled time since the anchor is a time.Duration, which at 1000× would
// overflow after about 100 days of real time. Re-anchoring keeps the same
// timeline, so the persisted anchor stays valid: Now computes with whole
// seconds as well, so an old anchor gives the same answer.
type Scaled struct {
	Speed float64
	// base is the clock it runs faster than; nil is the wall clock, read
	// directly so that elapsed time is monotonic.
	base      Clock
	mu        sync.Mutex
	origin    time.Time
	realStart time.Time
}

// reanchorEvery bounds the real time a Scaled clock multiplies at once.
const reanchorEvery = time.Hour

// NewScaled returns a clock running speed× real time. speed <= 1 means real
// time.
func NewScaled(speed float64) Clock {
	if speed <= 1 {
		return Real{}
	}
	now := time.Now().UTC()
	return &Scaled{Speed: speed, origin: now, realStart: now}
}

// Anchor pins a scaled clock: at wall time Real it read Virtual. Persisting
// the anchor lets a restarted process continue the same timeline, so
// deadlines stored before a crash keep their meaning.
type Anchor struct {
	Speed   float64   `json:"speed"`
	Virtual time.Time `json:"virtual"`
	Real    time.Time `json:"real"`
}

// NewAnchored returns the clock an anchor describes (speed < 1 counts as 1).
func NewAnchored(a Anchor) *Scaled {
	return &Scaled{Speed: max(a.Speed, 1), origin: a.Virtual.UTC(), realStart: a.Real}
}

// NewAnchoredOn is NewAnchored running faster than base instead of the
// wall clock (the anchor's Real is base's time), so that whoever injects
// one clock also drives the sped-up one.
func NewAnchoredOn(a Anchor, base Clock) *Scaled {
	s := NewAnchored(a)
	if _, real := base.(Real); !real {
		// The real clock is read directly: monotonic elapsed time, and a
		// timer without a goroutine per After.
		s.base = base
	}
	return s
}

// Anchor returns the clock's anchor (its latest: see Scaled).
func (s *Scaled) Anchor() Anchor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Anchor{Speed: s.Speed, Virtual: s.origin, Real: s.realStart}
}

// baseNow reads the clock s runs faster than.
func (s *Scaled) baseNow() time.Time {
	if s.base == nil {
		return time.Now()
	}
	return s.base.Now()
}

func (s *Scaled) Now() time.Time {
	real := s.baseNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := scale(s.origin, real.Sub(s.realStart), s.Speed)
	if real.Sub(s.realStart) >= reanchorEvery {
		s.origin, s.realStart = now, real
	}
	return now
}

// scale returns origin plus elapsed×speed without overflowing a Duration:
// whole seconds and the rest are scaled apart (a Duration holds 292 years,
// which 100 days at 1000× exceed).
func scale(origin time.Time, elapsed time.Duration, speed float64) time.Time {
	secs := float64(elapsed/time.Second) * speed
	whole := math.Floor(secs)
	frac := time.Duration((secs-whole)*float64(time.Second)) + time.Duration(float64(elapsed%time.Second)*speed)
	return time.Unix(origin.Unix()+int64(whole), int64(origin.Nanosecond())).Add(frac).UTC()
}

func (s *Scaled) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	wait := time.Duration(float64(d) / max(s.Speed, 1))
	if s.base == nil {
		time.AfterFunc(wait, func() { ch <- s.Now() })
		return ch
	}
	fired := s.base.After(wait) // now, not in the goroutine: d counts from the call
	go func() {
		<-fired
		ch <- s.Now()
	}()
	return ch
}

// Fake is a clock tests set and step by hand.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	return ch
}

// Next is when the earliest waiter fires (false: none waits). A harness
// that drives goroutines on the fake clock jumps to it once they have
// all settled, as a discrete-event simulation jumps to its next event.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, w := range f.waiters {
		if next.IsZero() || w.at.Before(next) {
			next = w.at
		}
	}
	return next, !next.IsZero()
}

// Step moves the clock forward by d and fires due waiters.
func (f *Fake) Step(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set sets the clock to t and fires due waiters.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t.UTC()
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}
