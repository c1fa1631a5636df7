package preempt

import (
	"os"
	"strconv"
	"sync"
	"time"
)

// PreemptionRate is the pool's preemption rate, percent of nodes an hour,
// that `sparecap run` got from the API (EnvPreemptionRate); 0 when unknown.
func PreemptionRate() float64 {
	r, err := strconv.ParseFloat(os.Getenv(EnvPreemptionRate), 64)
	if err != nil || r <= 0 {
		return 0
	}
	return r
}

// Schedule says when a checkpoint is due. With a preemption rate the
// interval is Daly's for that rate and the time the store really took to
// save (Store.Cost), worked out again after every save: a model whose
// checkpoint takes 40 s is not saved on the schedule of one that takes 4.
// Before a save was measured, and without a rate, it is the interval
// `sparecap run` gave (EnvCheckpointInterval) or the fallback; the first
// checkpoint comes after First when that is sooner, so the cost is
// measured early. The Python SDK's Schedule is the same.
type Schedule struct {
	store *Store
	// Rate in percent an hour (NewSchedule: PreemptionRate()).
	Rate float64
	// Fixed is the interval without a rate or a measured cost; First the
	// first checkpoint's, when sooner.
	Fixed, First time.Duration
	now          func() time.Time

	mu    sync.Mutex
	last  time.Time
	saves int
}

// NewSchedule is the schedule of store's checkpoints; fallback is the
// interval when `sparecap run` gave none and there is no rate.
func NewSchedule(store *Store, fallback time.Duration) *Schedule {
	fixed := fallback
	if d, err := time.ParseDuration(os.Getenv(EnvCheckpointInterval)); err == nil && d > 0 {
		fixed = d
	}
	return &Schedule{store: store, Rate: PreemptionRate(), Fixed: fixed, First: fixed, now: time.Now, last: time.Now()}
}

// Interval is the time between checkpoints as things stand.
func (s *Schedule) Interval() time.Duration {
	s.mu.Lock()
	saves := s.saves
	s.mu.Unlock()
	cost := s.store.Cost()
	switch {
	case s.Rate > 0 && cost > 0:
		return Interval(s.Rate, cost)
	case saves == 0 && cost <= 0 && s.First > 0 && s.First < s.Fixed:
		return s.First
	}
	return s.Fixed
}

// Due reports whether a checkpoint is due now.
func (s *Schedule) Due() bool {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	return s.now().Sub(last) >= s.Interval()
}

// Saved records a save: the next is an interval from now.
func (s *Schedule) Saved() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = s.now()
	s.saves++
}
