package budget

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

var nov = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// hoursOf spreads each day's spend evenly over its 24 hours.
func hoursOf(days ...float64) []float64 {
	var out []float64
	for _, d := range days {
		for range 24 {
			out = append(out, d/24)
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// upTo is hours as the store has them at at: nothing after it, the hour
// it falls in only up to it.
func upTo(hours []float64, at time.Time) []float64 {
	out := append([]float64(nil), hours...)
	for i := range out {
		from := nov.Add(time.Duration(i) * time.Hour)
		switch {
		case !from.Before(at):
			out[i] = 0
		case from.Add(time.Hour).After(at):
			out[i] *= at.Sub(from).Hours()
		}
	}
	return out
}

func TestProjectASteadyMonth(t *testing.T) {
	// $100 a day, ten and a half days in: $1,050 so far, $3,000 forecast.
	hours := hoursOf(100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100)
	at := nov.Add(10*24*time.Hour + 12*time.Hour)
	p := Project(upTo(hours, at), nov, nov.AddDate(0, 1, 0), at)
	if !near(p.Spend, 1050) || !near(p.Forecast, 3000) || !p.Interval || !near(p.Low, 3000) || !near(p.High, 3000) || p.Note != "" {
		t.Fatalf("%+v", p)
	}
	// Days that vary: an interval around the forecast, not below the
	// spend so far.
	hours = hoursOf(80, 120, 80, 120, 80, 120, 80, 120, 80, 120, 100)
	p = Project(upTo(hours, at), nov, nov.AddDate(0, 1, 0), at)
	if !p.Interval || p.Low >= p.Forecast || p.High <= p.Forecast || p.Low < p.Spend {
		t.Fatalf("varying days: %+v", p)
	}
	// A rate that went up: the recent week counts, not the month's mean.
	hours = hoursOf(50, 50, 50, 50, 100, 100, 100, 100, 100, 100, 100)
	p = Project(upTo(hours, at), nov, nov.AddDate(0, 1, 0), at)
	// The last 168 hours: 11 at $50 a day, 156 at $100 a day.
	if want := 50*4 + 100*6.5 + (11*50.0/24+156*100.0/24)/167*468; !near(p.Forecast, want) {
		t.Fatalf("forecast %.2f, want %.2f", p.Forecast, want)
	}
}

func TestProjectSaysWhenHistoryIsShort(t *testing.T) {
	p := Project(hoursOf(10), nov, nov.AddDate(0, 1, 0), nov.Add(30*time.Minute))
	if !strings.Contains(p.Note, "no forecast") {
		t.Fatalf("%+v", p)
	}
	p = Project(upTo(hoursOf(24, 24), nov.Add(36*time.Hour)), nov, nov.AddDate(0, 1, 0), nov.Add(36*time.Hour))
	if p.Interval || !strings.Contains(p.Note, "1 days of spend") || !near(p.Forecast, 36+24*28.5) {
		t.Fatalf("%+v", p)
	}
}

// TestProjectFromTheFirstHourThatSpent: a project made mid-month, at noon,
// has no history before its first spend: its rate is its own.
func TestProjectFromTheFirstHourThatSpent(t *testing.T) {
	hours := hoursOf(0, 0, 0, 0, 96)
	for i := 4 * 24; i < 4*24+12; i++ {
		hours[i] = 0 // it started at noon on the 5th
	}
	at := nov.Add(4*24*time.Hour + 18*time.Hour) // six hours later
	p := Project(upTo(hours, at), nov, nov.AddDate(0, 1, 0), at)
	if !near(p.Spend, 24) || !near(p.Forecast, 24+4*(30*24-4*24-18)) || p.Interval {
		t.Fatalf("%+v", p)
	}
	p = Project(hoursOf(0, 0, 0), nov, nov.AddDate(0, 1, 0), nov.Add(2*24*time.Hour+time.Hour))
	if p.Forecast != 0 || !strings.Contains(p.Note, "nothing spent") {
		t.Fatalf("%+v", p)
	}
}

func TestDueRaisesEachAlertOnce(t *testing.T) {
	b := domain.Budget{ID: "b", ProjectID: "p", Name: "ml", Amount: "1000", Thresholds: []int{50, 80, 100}, ChangePercent: 50}
	now := nov.Add(15 * 24 * time.Hour)
	p := Projection{Spend: 820, Forecast: 1640, Elapsed: 15}
	recent := []float64{40, 40, 40, 40, 40, 40, 40, 90, 10}
	due := Due(b, p, recent, now, map[string]bool{"spend:50": true})
	var keys []string
	for _, a := range due {
		keys = append(keys, a.Key)
		if a.Month != "2026-11" || a.Spend != "820.00" || a.Forecast != "1640.00" || a.ProjectID != "p" || !a.At.Equal(now) {
			t.Errorf("alert %+v", a)
		}
	}
	if strings.Join(keys, " ") != "spend:80 forecast change:2026-11-15" {
		t.Fatalf("due %v", keys)
	}
	fired := map[string]bool{"spend:50": true, "spend:80": true, "forecast": true, "change:2026-11-15": true}
	if again := Due(b, p, recent, now, fired); len(again) != 0 {
		t.Fatalf("raised again: %+v", again)
	}
	// Not yet: below the thresholds, the forecast in the first day, a
	// day within the change allowed, a bad amount.
	if got := Due(b, Projection{Spend: 100, Forecast: 5000, Elapsed: 0.5}, []float64{40, 40, 40, 40, 40, 40, 40, 59, 1}, now, nil); len(got) != 0 {
		t.Fatalf("early: %+v", got)
	}
	b.Amount = "lots"
	if got := Due(b, p, recent, now, nil); got != nil {
		t.Fatalf("a budget with no amount raised %+v", got)
	}
}
