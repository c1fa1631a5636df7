package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/termsafe"
)

var errTimeout = errors.New("timed out")

// poll calls check (first with first=true, without waiting) and then every
// pollInterval until it reports done, it fails, the command's context ends,
// or timeout has passed on the injected clock (errTimeout).
func (s *state) poll(cmd *cobra.Command, timeout time.Duration, check func(first bool) (bool, error)) error {
	ctx := cmd.Context()
	deadline := s.clock.Now().Add(timeout)
	for first := true; ; first = false {
		done, err := check(first)
		if err != nil || done {
			return err
		}
		if !s.clock.Now().Before(deadline) {
			return errTimeout
		}
		wait := min(s.pollInterval, deadline.Sub(s.clock.Now()))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.clock.After(wait):
		}
	}
}

// progress prints --wait progress lines on stderr, each only when it
// differs from the one before, prefixed with the time waited so far.
type progress struct {
	s     *state
	w     io.Writer
	start time.Time
	last  string
}

func (s *state) newProgress(cmd *cobra.Command) *progress {
	return &progress{s: s, w: cmd.ErrOrStderr(), start: s.clock.Now()}
}

func (p *progress) line(l string) {
	if l == p.last {
		return
	}
	p.last = l
	fmt.Fprintf(p.w, "[%6s] %s\n", shortDuration(p.s.clock.Now().Sub(p.start)), termsafe.Escape(l))
}

// transient decides whether a polling error ends the wait: client errors
// (4xx) and a cancelled context do; server errors and network trouble are
// reported and the polling goes on, since a restarting server should not
// abort a 15-minute wait.
func (p *progress) transient(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		return err
	}
	p.last = ""
	fmt.Fprintf(p.w, "warning: %v (retrying)\n", err)
	return nil
}
