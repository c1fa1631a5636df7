package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// courtesyWait is the longest the notice waits for a courtesy that goes
// before it (a drain's marks).
const courtesyWait = time.Second

// drainStep is the draining state's step.
//
// Before the deadline it keeps the drain's promises on a cluster that may
// misbehave: the marks are applied again whenever someone removed them;
// every unit of the workload gets its notice with grace to the deadline,
// work that arrived after T+0 included; work already stopping whose grace
// would run past the deadline is notified again with less; support work
// (DaemonSet pods) gets its notice once the workload is gone. Every call
// is cut off at the deadline, so a cluster that hangs never holds the
// node past it. Once every unit of work had its notice, Notified is
// stored; once none is left, the drain ends early (endDrain).
//
// At the deadline nothing is asked of the cluster: the node is removed
// and its machine taken back (endDrain).
func drainStep(cfg Config, in Input) Ready {
	switch in.Phase {
	case PhaseLooked:
		return notify(cfg, in)
	case PhaseNotified:
		return notified(cfg, in)
	case PhaseCleanListed, PhaseCleanEnded, PhaseCleanTold:
		return cleanupRound(cfg, in)
	}
	n := in.Node
	if !in.Now.Before(n.Deadline) {
		return endDrain(cfg, in, domain.OutcomeDeadline)
	}
	// The marks go first, so the cluster places nothing new on the node;
	// until the notice is out they may take at most courtesyWait, and are
	// tried again on the next turn if they took longer.
	mark := Call{Kind: CallMark, Marks: driver.Marks{Cause: n.DrainCause, Deadline: n.Deadline}, Until: n.Deadline}
	if !n.Notified {
		mark.Within = courtesyWait
	}
	return Ready{Calls: []Call{mark, {Kind: CallList, Group: 1, Until: n.Deadline}}, Next: PhaseLooked}
}

// notify gives every unit of work that is due its notice, all at once,
// each to be gone by the deadline (the driver works out the grace,
// driver.GraceBy, as it acts, so time spent waiting for a turn never
// stretches work past the deadline), then posts the notices the tenant
// reads. Only the notices to the work are essential: a failure there
// fails the turn, which is retried; the marks and the notices the tenant
// reads are courtesies.
func notify(cfg Config, in Input) Ready {
	n := in.Node
	list, _ := result(in.Results, CallList)
	if list.Err != nil {
		if !in.Now.Before(n.Deadline) {
			return endDrain(cfg, in, domain.OutcomeDeadline)
		}
		return failed(drainDue(cfg, in), fmt.Errorf("list work: %w", list.Err))
	}
	work := list.Work
	// The workload first; support work (log shippers, device plugins) once
	// the workload is gone.
	support := !slices.ContainsFunc(work, func(w driver.Work) bool { return !w.Support })
	turn := func(w driver.Work) bool { return w.Support == support }
	var calls []Call
	for _, w := range work {
		if turn(w) && (!w.Stopping || w.KillAt.After(n.Deadline)) {
			calls = append(calls, Call{Kind: CallNotify, Work: w, By: n.Deadline, Until: n.Deadline, Essential: true})
		}
	}
	// The node may be gone from its cluster (it never joined, or someone
	// deleted it): nothing to mark or post a notice on, but work the
	// cluster still binds to it got its notice all the same.
	var cs []Courtesy
	mark, _ := result(in.Results, CallMark)
	gone := errors.Is(mark.Err, domain.ErrNotFound)
	if mark.Err != nil && !gone {
		cs = append(cs, Courtesy{"mark the node draining", mark.Err})
	}
	// Notices explain the drain: on the node once, and on each unit of
	// work that got its notice now (on every one of the workload until the
	// notice is recorded, in case a crash came between the two).
	e := clusterNotice(n)
	if !n.Notified && !gone {
		calls = append(calls, Call{Kind: CallPost, Group: 1, Notice: e, Until: n.Deadline})
	}
	for _, w := range work {
		if (!n.Notified && !w.Support) || (turn(w) && !w.Stopping) {
			calls = append(calls, Call{Kind: CallPost, Group: 2, Work: w, OnWork: true, Notice: e, Until: n.Deadline})
		}
	}
	carry := Carry{Work: work, Gone: gone}
	if len(calls) == 0 {
		in.Phase, in.Carry, in.Results = PhaseNotified, carry, nil
		return withCourtesies(notified(cfg, in), cs)
	}
	return Ready{Calls: calls, Next: PhaseNotified, Carry: carry, Courtesies: cs}
}

// notified reads the notices' answers: once every unit of work had its
// notice, Notified is stored; once none is left, the drain ends.
func notified(cfg Config, in Input) Ready {
	n := in.Node
	var errs []error
	for _, r := range results(in.Results, CallNotify) {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("notify %s/%s: %w", r.Call.Work.Namespace, r.Call.Work.Name, r.Err))
		}
	}
	if len(errs) > 0 {
		if !in.Now.Before(n.Deadline) {
			return endDrain(cfg, in, domain.OutcomeDeadline)
		}
		return failed(drainDue(cfg, in), errors.Join(errs...))
	}
	cs := postCourtesies(in.Results)
	var r Ready
	if !n.Notified {
		w := write(in)
		w.Notified = true
		r = Ready{Write: w, From: domain.NodeDraining, Moved: true}
		if !n.ReadyAt.IsZero() {
			r.Obs = []Observation{DrainObservation(KindNoticeDelivered, *w, in.Now)}
		}
		in.Node = *w
	}
	r.SaveWork = checkpoint(in)
	if len(in.Carry.Work) > 0 {
		r.Due = drainDue(cfg, in)
		return withCourtesies(r, cs)
	}
	// Grace periods are whole seconds rounded down, so work that ignores
	// its notice is killed up to a second before the deadline: work gone
	// in that last second was ended by the deadline, not by itself.
	outcome := domain.OutcomeEarly
	if !in.Now.Before(n.Deadline.Add(-time.Second)) {
		outcome = domain.OutcomeDeadline
	}
	end := endDrain(cfg, in, outcome)
	end.Write, end.From, end.Moved, end.Obs = r.Write, r.From, r.Moved, append(r.Obs, end.Obs...)
	return withCourtesies(end, cs)
}

// postCourtesies are the tenant's notices that failed (a notice on
// something gone since is no failure).
func postCourtesies(rs []Result) []Courtesy {
	var cs []Courtesy
	for _, r := range rs {
		if r.Call.Kind != CallPost || r.Err == nil || errors.Is(r.Err, domain.ErrNotFound) {
			continue
		}
		what := "post the drain's notice on the node"
		if r.Call.OnWork {
			what = fmt.Sprintf("post the drain's notice on its work (%s/%s)", r.Call.Work.Namespace, r.Call.Work.Name)
		}
		cs = append(cs, Courtesy{what, r.Err})
	}
	return cs
}

// drainDue: a drain waits for its work to end (woken by its driver, or
// polled), by its deadline; until its notice is out, in the Notices pool.
func drainDue(cfg Config, in Input) Due {
	pool := Workers
	if !in.Node.Notified {
		pool = Notices
	}
	return wait(in.Now, in.Facts.Tells, cfg.Poll, in.Node.Deadline, pool)
}

// checkpoint is the checkpoint the node's work reported after its notice
// (the driver's Load, from what it watches), to be recorded once: the
// work the ledger put at risk at the notice was saved, not lost. Zero if
// there is none, or it is recorded already.
func checkpoint(in Input) time.Time {
	n, l := in.Node, in.Facts.Load
	if n.DrainStartedAt.IsZero() || in.Facts.Saved || !l.Known {
		return time.Time{}
	}
	// Checkpoints are reported to the second (RFC 3339): one in the
	// notice's second counts as after it.
	if l.LastCheckpoint.Before(n.DrainStartedAt.Truncate(time.Second)) {
		return time.Time{}
	}
	return l.LastCheckpoint
}
