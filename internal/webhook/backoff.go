package webhook

import (
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/random"
)

// The retry schedule of a delivery that did not get a 2xx answer: the
// first retry FirstRetry after the first attempt, each later one twice as
// long after the one before, up to MaxRetryGap apart; each gap is jittered
// by ±20% so the deliveries to an endpoint that came back do not all
// arrive at once. A delivery not delivered RetryWindow after it was made
// has failed: about 30 attempts.
const (
	FirstRetry  = 5 * time.Second
	MaxRetryGap = time.Hour
	RetryWindow = 24 * time.Hour
)

// retryBackoff is that schedule.
var retryBackoff = backoff.Policy{First: FirstRetry, Max: MaxRetryGap, Low: 80, High: 120}

// retryGap is the wait after the attempts-th failed attempt.
func retryGap(attempts int, r *random.Source) time.Duration {
	return retryBackoff.Gap(attempts, r)
}

// MaxHold bounds how long an endpoint that keeps failing is left alone
// before its next probe: one that comes back gets its backlog within this.
const MaxHold = 5 * time.Minute

// holdFor is how long an endpoint whose last failures attempts in a row
// failed is left alone: the retry gap, capped at MaxHold.
func holdFor(failures int, r *random.Source) time.Duration {
	return min(retryGap(failures, r), MaxHold)
}
