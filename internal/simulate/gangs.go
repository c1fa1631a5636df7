package simulate

import (
	"slices"
	"strings"
	"time"
)

// jobRun is what a tenant's jobs made of its ready preemptible nodes,
// in GPU-seconds: running is the time gangs ran (the rest of the ready
// time waited for a gang), checkpoint their checkpoints' share, lost the
// work a reclaim threw away, restart the restarts it cost; work is the
// useful work's changes over time, for the job completions.
type jobRun struct {
	running, checkpoint, lost, restart int64
	// stopped counts the nodes whose work a reclaim stopped: every
	// member of a gang one of whose nodes was reclaimed.
	stopped int
	work    []workChange
}

// gangRunner forms gangs out of a tenant's ready nodes as they come and
// breaks one when a member leaves (see Jobs.GangGPUs). Without a gang
// size every node is a gang of its own, which is the per-node model.
type gangRunner struct {
	j      Jobs
	save   bool          // the checkpoint at the notice fits the window
	period time.Duration // checkpoint interval + cost
	useful float64       // share of a running gang's time that is useful
	free   []*span       // ready, in no gang, by readiness
	of     map[*span]*gang
	out    jobRun
}

// gang is one running gang: its members, GPUs and when it (re)started.
type gang struct {
	members []*span
	gpus    int
	start   time.Time
}

// savesAtNotice: the job checkpoints at the notice and the checkpoint
// fits the policy's drain window, so a reclaim loses no work.
func savesAtNotice(j Jobs, pol Policy) bool {
	return j.CheckpointAtNotice && j.CheckpointCost.D <= pol.DrainWindow.D
}

func newGangRunner(j Jobs, save bool) *gangRunner {
	g := &gangRunner{j: j, save: save, period: j.CheckpointInterval.D + j.CheckpointCost.D, useful: 1, of: map[*span]*gang{}}
	if j.CheckpointInterval.D > 0 {
		g.useful = j.CheckpointInterval.D.Seconds() / g.period.Seconds()
	}
	return g
}

// run plays a tenant's node spans through the gangs up to end.
func (g *gangRunner) run(spans []*span, end time.Time) jobRun {
	g.play(steps(spans), end, end)
	return g.out
}

// gangStep is a node joining (ready) or leaving (stopped) at a time.
type gangStep struct {
	at    time.Time
	leave bool
	s     *span
}

// steps are the joins and leaves of spans, by time; at one instant
// leaves first (a gang broken now can take a node ready now), then by
// node.
func steps(spans []*span) []gangStep {
	var out []gangStep
	for _, s := range spans {
		if s.ready.IsZero() || !s.stop.After(s.ready) {
			continue
		}
		out = append(out, gangStep{s.ready, false, s}, gangStep{s.stop, true, s})
	}
	slices.SortFunc(out, func(a, b gangStep) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.leave != b.leave {
			if a.leave {
				return -1
			}
			return 1
		}
		return nodeOrder(a.s, b.s)
	})
	return out
}

// play applies the steps up to until (the leaves at until excepted: a
// node that leaves at until still runs at until), end being the horizon.
func (g *gangRunner) play(steps []gangStep, until, end time.Time) {
	for _, st := range steps {
		if st.at.After(until) || (st.leave && st.at.Equal(until) && until.Before(end)) {
			continue
		}
		if st.leave {
			g.leave(st.s, st.at, end)
		} else {
			i, _ := slices.BinarySearchFunc(g.free, st.s, nodeOrder)
			g.free = slices.Insert(g.free, i, st.s)
		}
		g.form(st.at)
	}
}

// lostAfter is the work a gang that has run for ran loses if it stops
// now: none if it checkpoints at the notice, else what it did since its
// last checkpoint.
func (g *gangRunner) lostAfter(ran time.Duration) time.Duration {
	switch {
	case g.save:
		return 0
	case g.j.CheckpointInterval.D > 0:
		return ran % g.period
	}
	return ran
}

// nodeOrder orders spans by readiness, then machine, then name: no
// random ID decides which nodes share a gang.
func nodeOrder(a, b *span) int {
	if c := a.ready.Compare(b.ready); c != 0 {
		return c
	}
	if c := strings.Compare(a.n.MachineID, b.n.MachineID); c != 0 {
		return c
	}
	return strings.Compare(a.n.Name, b.n.Name)
}

// form starts gangs at t while the free nodes hold enough GPUs, taking
// the longest ready first.
func (g *gangRunner) form(t time.Time) {
	for len(g.free) > 0 {
		n, gpus := 0, 0
		for n < len(g.free) && (gpus < g.j.GangGPUs || n == 0) {
			gpus += g.free[n].n.GPUs
			n++
		}
		if gpus < g.j.GangGPUs {
			return
		}
		gg := &gang{members: slices.Clone(g.free[:n]), gpus: gpus, start: t}
		for _, s := range gg.members {
			g.of[s] = gg
		}
		g.free = slices.Delete(g.free, 0, n)
		r := float64(gpus) * g.useful
		g.out.work = append(g.out.work, workChange{at: t, rate: r})
	}
}

// leave takes node s out at t: out of the free nodes, or out of its gang,
// which stops (a reclaim costs the gang its work since its last
// checkpoint and a restart) and frees its other members.
func (g *gangRunner) leave(s *span, t, end time.Time) {
	gg := g.of[s]
	if gg == nil {
		// free stays in nodeOrder (joins come in that order, members
		// going back are inserted in it): a tenant whose nodes never make
		// a gang does not pay a scan of all of them at each leave.
		if i, ok := slices.BinarySearchFunc(g.free, s, nodeOrder); ok {
			g.free = slices.Delete(g.free, i, i+1)
		}
		return
	}
	ran := t.Sub(gg.start)
	secs := int64(ran/time.Second) * int64(gg.gpus)
	g.out.running += secs
	if g.period > 0 {
		g.out.checkpoint += secs * int64(g.j.CheckpointCost.D/time.Millisecond) / int64(g.period/time.Millisecond)
	}
	ch := workChange{at: t, rate: -float64(gg.gpus) * g.useful}
	if reclaimed(s.n) && !s.n.DrainStartedAt.After(end) {
		lost := g.lostAfter(ran)
		if s.told && g.j.CheckpointAhead {
			// Told ahead, it checkpointed to end at the notice: one more
			// checkpoint, nothing lost.
			lost = 0
			g.out.checkpoint += int64(g.j.CheckpointCost.D/time.Second) * int64(gg.gpus)
		}
		g.out.lost += int64(lost/time.Second) * int64(gg.gpus)
		g.out.restart += int64(g.j.RestartCost.D/time.Second) * int64(gg.gpus)
		g.out.stopped += len(gg.members)
		ch.jump = -float64(gg.gpus) * (lost + g.j.RestartCost.D).Seconds()
	}
	g.out.work = append(g.out.work, ch)
	for _, m := range gg.members {
		delete(g.of, m)
		if m != s {
			i, _ := slices.BinarySearchFunc(g.free, m, nodeOrder)
			g.free = slices.Insert(g.free, i, m)
		}
	}
}
