package stats

import (
	"fmt"
	"math"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

// HoursPerWeek are the buckets of Week: Monday 00:00 UTC is hour 0.
const HoursPerWeek = 7 * 24

// MinNodeHours is the service an hour of the week needs before its rate is
// taken as a pattern, and MinHistory the window: below them Week says the
// history is too short.
const (
	MinNodeHours = 8
	MinHistory   = 14 * 24 * time.Hour
)

var days = [7]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// HourOfWeek is t's hour of the week in UTC, Monday 00:00 being 0.
func HourOfWeek(t time.Time) int {
	t = t.UTC()
	return (int(t.Weekday())+6)%7*24 + t.Hour()
}

// week accumulates time per hour of the week, in microseconds: whole
// weeks once for every bucket, the rest bucket by bucket, so an interval
// of a year costs at most a week of steps.
type week struct {
	each  int64 // added to every bucket
	micro [HoursPerWeek]int64
}

// add spreads [start, end) over the hours of the week it covers.
func (w *week) add(start, end time.Time) {
	if !start.Before(end) {
		return
	}
	const weekLen = 7 * 24 * time.Hour
	if n := end.Sub(start) / weekLen; n > 0 {
		w.each += int64(n) * int64(time.Hour/time.Microsecond)
		start = start.Add(n * weekLen)
	}
	for start.Before(end) {
		next := earliest(start.Truncate(time.Hour).Add(time.Hour), end)
		w.micro[HourOfWeek(start)] += next.Sub(start).Microseconds()
		start = next
	}
}

func (w *week) hours(h int) float64 {
	return float64(w.each+w.micro[h]) / float64(time.Hour/time.Microsecond)
}

// Week is the interruption history of the pool of region and gpuType by
// hour of the week over [from, to) (to cut at now), with the same
// definitions as Preemptions, and a forecast of the ahead hours from the
// window's end: each the history of its hour of the week. machines are the
// fleet's; nodes on machines of other pools are left out. The history is
// long enough once the pool's first service in the window is MinHistory
// old and every hour of the week has MinNodeHours.
func Week(nodes []domain.Node, machines []domain.Machine, region, gpuType string, from, to, now time.Time, ahead int) apiv1.WeekStats {
	in := map[string]bool{}
	for _, m := range machines {
		if m.Region == region && m.GPUType == gpuType {
			in[m.ID] = true
		}
	}
	end := earliest(to, now)
	var served, window week
	var preemptions [HoursPerWeek]int
	window.add(from, end)
	first := end // the pool's history starts at its first service
	for _, n := range nodes {
		if n.Class != domain.Preemptible || n.ReadyAt.IsZero() || !in[n.MachineID] {
			continue
		}
		start := latest(n.ReadyAt, from)
		first = earliest(first, start)
		served.add(start, earliest(serviceEnd(n, now), end))
		if Preempted(n) && !n.DrainStartedAt.Before(from) && n.DrainStartedAt.Before(end) {
			preemptions[HourOfWeek(n.DrainStartedAt)]++
		}
	}
	out := apiv1.WeekStats{Region: region, GPUType: gpuType, From: from.UTC(), To: to.UTC(), Hours: make([]apiv1.WeekHour, HoursPerWeek)}
	short := 0
	for h := range HoursPerWeek {
		wh := apiv1.WeekHour{HourOfWeek: h, Day: days[h/24], Hour: h % 24, NodeHours: served.hours(h), Preemptions: preemptions[h]}
		wh.Rate, wh.RateLow, wh.RateHigh = poissonRate(wh.Preemptions, wh.NodeHours)
		if occ := window.hours(h); occ > 0 {
			wh.MeanNodes = wh.NodeHours / occ
		}
		wh.Enough = wh.NodeHours >= MinNodeHours
		if !wh.Enough {
			short++
		}
		out.Hours[h] = wh
	}
	switch span := max(end.Sub(first), 0); {
	case span < MinHistory:
		out.Note = fmt.Sprintf("only %.1f days of history (%d needed): the hours of the week are not a pattern yet", span.Hours()/24, int(MinHistory.Hours()/24))
	case short > 0:
		out.Note = fmt.Sprintf("%d of the 168 hours of the week have less than %d node-hours of service: their rates are not a pattern yet", short, MinNodeHours)
	default:
		out.EnoughHistory = true
	}
	start := to.UTC().Truncate(time.Hour)
	if start.Before(to) {
		start = start.Add(time.Hour)
	}
	for i := range max(ahead, 0) {
		t := start.Add(time.Duration(i) * time.Hour)
		out.Forecast = append(out.Forecast, apiv1.ForecastHour{Start: t, WeekHour: out.Hours[HourOfWeek(t)]})
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// poissonRate is the rate of k events over hours of exposure and its 95%
// confidence interval (Garwood's, exact for a Poisson count, with the
// chi-square quantiles of Wilson and Hilferty, exact for two degrees of
// freedom). Without exposure nothing is known: all zero.
func poissonRate(k int, hours float64) (rate, low, high float64) {
	if hours <= 0 {
		return 0, 0, 0
	}
	rate = float64(k) / hours
	if k > 0 {
		low = chiSquare(0.025, 2*k) / 2 / hours
	}
	high = chiSquare(0.975, 2*k+2) / 2 / hours
	return rate, low, high
}

// chiSquare is the p-quantile of the chi-square distribution with nu
// degrees of freedom.
func chiSquare(p float64, nu int) float64 {
	if nu == 2 {
		return -2 * math.Log(1-p)
	}
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	v := float64(nu)
	c := 1 - 2/(9*v) + z*math.Sqrt(2/(9*v))
	return v * c * c * c
}

// RateOver is the mean preemption rate per node-hour over the hours hours
// from start, each from its hour of the week in w; enough is false when
// one of those hours has too little service to tell (Enough).
func RateOver(w apiv1.WeekStats, start time.Time, hours int) (rate float64, enough bool) {
	if hours <= 0 || len(w.Hours) != HoursPerWeek {
		return 0, false
	}
	enough = true
	for i := range hours {
		h := w.Hours[HourOfWeek(start.Add(time.Duration(i)*time.Hour))]
		enough = enough && h.Enough
		rate += h.Rate
	}
	return rate / float64(hours), enough
}
