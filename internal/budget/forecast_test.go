package budget

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

var nov = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func TestProjectASteadyMonth(t *testing.T) {
	// $100 a day, ten and a half days in: $1,050 so far, $3,000 forecast.
	days := make([]float64, 11)
	for i := range days {
		days[i] = 100
	}
	days[10] = 50
	p := Project(days, nov, nov.AddDate(0, 1, 0), nov.Add(10*24*time.Hour+12*time.Hour))
	if math.Abs(p.Spend-1050) > 1e-9 || math.Abs(p.Forecast-3000) > 1e-6 || !p.Interval || p.Low != p.Forecast || p.High != p.Forecast || p.Note != "" {
		t.Fatalf("%+v", p)
	}
	// Days that vary: an interval around the forecast, wider with more
	// days left.
	for i := range days[:10] {
		days[i] = float64(80 + 40*(i%2))
	}
	p = Project(days, nov, nov.AddDate(0, 1, 0), nov.Add(10*24*time.Hour+12*time.Hour))
	if !p.Interval || p.Low >= p.Forecast || p.High <= p.Forecast || p.Low < p.Spend {
		t.Fatalf("varying days: %+v", p)
	}
	// A rate that went up: the recent week counts, not the month's mean.
	for i := range days {
		days[i] = 50
		if i >= 4 {
			days[i] = 100
		}
	}
	days[10] = 50
	p = Project(days, nov, nov.AddDate(0, 1, 0), nov.Add(10*24*time.Hour+12*time.Hour))
	if want := 50*4 + 100*6 + 50 + 100*19.5; math.Abs(p.Forecast-want) > 1e-6 {
		t.Fatalf("forecast %.2f, want %.2f", p.Forecast, want)
	}
}

func TestProjectSaysWhenHistoryIsShort(t *testing.T) {
	p := Project([]float64{10}, nov, nov.AddDate(0, 1, 0), nov.Add(30*time.Minute))
	if p.Forecast != 10 || !strings.Contains(p.Note, "no forecast") {
		t.Fatalf("%+v", p)
	}
	p = Project([]float64{24, 12}, nov, nov.AddDate(0, 1, 0), nov.Add(36*time.Hour))
	if p.Interval || !strings.Contains(p.Note, "1 complete days") || math.Abs(p.Forecast-36-24*28.5) > 1e-6 {
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
