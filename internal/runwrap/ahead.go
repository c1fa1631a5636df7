package runwrap

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// scheduledPoll is how often a scheduled notice is looked for: it is
// known hours ahead, and on Slurm each look asks slurmctld.
const scheduledPoll = 15 * time.Second

// ahead watches for a scheduled notice (preempt.Scheduled: the node's
// machine is booked, hours ahead) and sends its time once it is
// Config.Ahead away, once for each time announced: the job is asked for a
// checkpoint then, so that the notice finds little work to lose even when
// a checkpoint takes longer than the drain window. It logs each time it
// sees announced. Nothing is sent with Ahead < 0.
func (r *run) ahead(ctx context.Context) <-chan time.Time {
	out := make(chan time.Time, 1)
	if r.cfg.Ahead < 0 || r.cfg.AnnotationsFile == "-" && r.cfg.Scheduled == nil {
		return out
	}
	read := r.cfg.Scheduled
	if read == nil {
		read = func(ctx context.Context) (time.Time, bool) { return preempt.Scheduled(ctx, r.cfg.AnnotationsFile) }
	}
	go func() {
		select { // the job sets up its signal handlers first
		case <-ctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.Startup):
		}
		var seen, sent time.Time
		for {
			if at, ok := read(ctx); ok {
				if !at.Equal(seen) {
					seen = at
					r.logf("the node's notice is scheduled for %s (its machine is booked)", at.UTC().Format(time.RFC3339))
				}
				if !at.Equal(sent) && !r.cfg.Clock.Now().Before(at.Add(-r.cfg.Ahead)) {
					sent = at
					select {
					case out <- at:
					default:
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-r.cfg.Clock.After(min(r.cfg.Poll*60, scheduledPoll)):
			}
		}
	}()
	return out
}
