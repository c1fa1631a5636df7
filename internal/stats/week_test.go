package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// weekStart is a Monday 00:00 UTC.
var weekStart = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// businessRate is a pool whose preemptible nodes are reclaimed ten times
// as often in weekday working hours (09:00-17:00 UTC) as otherwise.
func businessRate(h int) float64 {
	if h/24 < 5 && h%24 >= 9 && h%24 < 17 {
		return 0.05
	}
	return 0.005
}

// history is four weeks of a pool of width nodes, each replaced at once
// when reclaimed, reclaimed at rate(hour of week) per node-hour (a
// Poisson process, drawn by thinning).
func history(seed uint64, width int, weeks int, rate func(int) float64) ([]domain.Node, []domain.Machine) {
	r := rand.New(rand.NewPCG(seed, 1))
	end := weekStart.Add(time.Duration(weeks) * 7 * 24 * time.Hour)
	const top = 0.05 // the highest rate, for thinning
	var nodes []domain.Node
	machines := make([]domain.Machine, width)
	for m := range width {
		machines[m] = domain.Machine{ID: fmt.Sprintf("m%d", m), Region: "r", GPUType: "g"}
		ready := weekStart
		t := ready
		for {
			t = t.Add(time.Duration(r.ExpFloat64() / top * float64(time.Hour)))
			if !t.Before(end) {
				break
			}
			if r.Float64() >= rate(HourOfWeek(t))/top {
				continue
			}
			nodes = append(nodes, domain.Node{ID: fmt.Sprintf("n%d", len(nodes)), MachineID: machines[m].ID, Class: domain.Preemptible,
				State: domain.NodeRemoved, ReadyAt: ready, DrainStartedAt: t, DrainCause: domain.CausePreempted})
			ready = t
		}
		nodes = append(nodes, domain.Node{ID: fmt.Sprintf("n%d", len(nodes)), MachineID: machines[m].ID, Class: domain.Preemptible,
			State: domain.NodeReady, ReadyAt: ready})
	}
	return nodes, machines
}

// TestWeekRecoversAPattern: from four weeks of a pool reclaimed ten times
// as often in weekday working hours, the hours of the week show that
// pattern: the working hours' rates near 0.05 and the others near 0.005,
// and about 95% of the hours' 95% intervals hold their true rate.
func TestWeekRecoversAPattern(t *testing.T) {
	nodes, machines := history(7, 40, 4, businessRate)
	end := weekStart.Add(28 * 24 * time.Hour)
	w := Week(nodes, machines, "r", "g", weekStart, end, end, 24)
	if !w.EnoughHistory || w.Note != "" {
		t.Fatalf("four weeks of 40 nodes: enough %v, note %q", w.EnoughHistory, w.Note)
	}
	var busy, quiet [2]float64 // preemptions, node-hours
	covered := 0
	for _, h := range w.Hours {
		if math.Abs(h.NodeHours-40*4) > 1e-6 || math.Abs(h.MeanNodes-40) > 1e-6 {
			t.Fatalf("hour %d: %.3f node-hours, %.3f nodes; want 160 and 40 (every node always serving)", h.HourOfWeek, h.NodeHours, h.MeanNodes)
		}
		want := businessRate(h.HourOfWeek)
		if h.RateLow <= want && want <= h.RateHigh {
			covered++
		}
		acc := &quiet
		if want > 0.01 {
			acc = &busy
		}
		acc[0] += float64(h.Preemptions)
		acc[1] += h.NodeHours
	}
	t.Logf("working hours %.4f, other hours %.4f per node-hour; %d of 168 intervals hold the true rate", busy[0]/busy[1], quiet[0]/quiet[1], covered)
	if b, q := busy[0]/busy[1], quiet[0]/quiet[1]; math.Abs(b-0.05) > 0.005 || math.Abs(q-0.005) > 0.001 {
		t.Errorf("working hours %.4f, other hours %.4f preemptions per node-hour; want 0.05 and 0.005", b, q)
	}
	if share := float64(covered) / HoursPerWeek; share < 0.88 {
		t.Errorf("%.0f%% of the hours' 95%% intervals hold their true rate", 100*share)
	}
	// The forecast is the history of the coming hours: a Monday from 00:00.
	if len(w.Forecast) != 24 || !w.Forecast[0].Start.Equal(end) || w.Forecast[9].HourOfWeek != 9 || w.Forecast[9].Rate != w.Hours[9].Rate {
		t.Errorf("forecast %+v", w.Forecast[:2])
	}
}

// TestWeekAddsUp: the node-hours of the hours of the week add up to the
// pool's node-hours over the window (Preemptions), and its preemptions
// too, for windows that start and end mid-hour, span whole weeks and cut
// nodes at both ends; a node of another pool counts in neither.
func TestWeekAddsUp(t *testing.T) {
	nodes, machines := history(3, 5, 6, businessRate)
	machines = append(machines, domain.Machine{ID: "other", Region: "r", GPUType: "h"})
	nodes = append(nodes, domain.Node{ID: "x", MachineID: "other", Class: domain.Preemptible, State: domain.NodeReady, ReadyAt: weekStart})
	for _, win := range [][2]time.Duration{{0, 42 * 24 * time.Hour}, {90 * time.Minute, 23*24*time.Hour + 17*time.Minute}, {3 * time.Hour, 4 * time.Hour}} {
		from, to := weekStart.Add(win[0]), weekStart.Add(win[1])
		now := weekStart.Add(42 * 24 * time.Hour)
		w := Week(nodes, machines, "r", "g", from, to, now, 0)
		var hours float64
		var n int
		for _, h := range w.Hours {
			hours += h.NodeHours
			n += h.Preemptions
		}
		want := Preemptions(nodes, machines[:len(machines)-1], from, to, now)[0]
		if math.Abs(hours-want.PreemptibleNodeHours) > 1e-6 || n != want.Preemptions {
			t.Errorf("window %v: %.6f node-hours and %d preemptions by hour; %.6f and %d in all", win, hours, n, want.PreemptibleNodeHours, want.Preemptions)
		}
	}
}

// TestWeekSaysWhenHistoryIsShort: three days are not a pattern, nor are
// hours nobody served in; the forecast wraps from Sunday to Monday.
func TestWeekSaysWhenHistoryIsShort(t *testing.T) {
	nodes, machines := history(5, 2, 1, businessRate)
	from := weekStart.Add(4 * 24 * time.Hour)
	to := from.Add(3*24*time.Hour - 30*time.Minute) // Sunday 23:30
	w := Week(nodes, machines, "r", "g", from, to, to, 3)
	if w.EnoughHistory || !strings.Contains(w.Note, "only 3.0 days of history") {
		t.Errorf("three days: enough %v, note %q", w.EnoughHistory, w.Note)
	}
	if h := w.Hours[0]; h.Enough || h.NodeHours != 0 || h.RateHigh != 0 || h.Rate != 0 {
		t.Errorf("Monday 00:00, never served in the window: %+v", h)
	}
	if f := w.Forecast; len(f) != 3 || f[0].HourOfWeek != 0 || !f[0].Start.Equal(weekStart.Add(7*24*time.Hour)) || f[2].HourOfWeek != 2 {
		t.Errorf("forecast from Sunday 23:30: %+v", f)
	}
	long, _ := history(5, 1, 3, func(int) float64 { return 0.001 })
	w = Week(long, machines[:1], "r", "g", weekStart, weekStart.Add(21*24*time.Hour), weekStart.Add(21*24*time.Hour), 0)
	if w.EnoughHistory || !strings.Contains(w.Note, "168 hours of the week have less than 8 node-hours") {
		t.Errorf("one node for three weeks: enough %v, note %q", w.EnoughHistory, w.Note)
	}
}

// TestChiSquare: the quantiles the intervals use, against tables.
func TestChiSquare(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		nu   int
		want float64
	}{{0.975, 2, 7.3778}, {0.025, 2, 0.0506}, {0.975, 10, 20.483}, {0.025, 10, 3.247}, {0.975, 42, 61.777}, {0.025, 42, 26.0}} {
		if got := chiSquare(tc.p, tc.nu); math.Abs(got-tc.want)/tc.want > 0.01 {
			t.Errorf("chi-square %.3f quantile, %d degrees: %.4f, want %.4f", tc.p, tc.nu, got, tc.want)
		}
	}
}

// TestRateOver: a run during weekday working hours meets the pool's
// working-hours rate, one over a weekend the quiet one; an hour never
// served makes the answer not enough.
func TestRateOver(t *testing.T) {
	nodes, machines := history(7, 40, 4, businessRate)
	end := weekStart.Add(28 * 24 * time.Hour)
	w := Week(nodes, machines, "r", "g", weekStart, end, end, 0)
	if r, ok := RateOver(w, weekStart.Add(9*time.Hour), 8); !ok || math.Abs(r-0.05) > 0.01 {
		t.Errorf("Monday 09:00-17:00: %.4f (%v), want about 0.05", r, ok)
	}
	if r, ok := RateOver(w, weekStart.Add(5*24*time.Hour), 48); !ok || math.Abs(r-0.005) > 0.002 {
		t.Errorf("the weekend: %.4f (%v), want about 0.005", r, ok)
	}
	w.Hours[3].Enough = false
	if _, ok := RateOver(w, weekStart, 8); ok {
		t.Error("an hour without enough service was taken as enough")
	}
}
