package forecast

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

var t0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday

// TestLendable: a pool's GPUs in service less its standard nodes', hour
// by hour; other pools' machines, preemptible nodes and machines out of
// service do not count.
func TestLendable(t *testing.T) {
	ms := []domain.Machine{
		{ID: "m1", Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: t0.Add(-time.Hour)},
		{ID: "m2", Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: t0.Add(90 * time.Minute)},
		{ID: "m3", Region: "r", GPUType: "H100", GPUs: 8, OutOfService: true},
		{ID: "x", Region: "r", GPUType: "L40S", GPUs: 8},
	}
	ns := []domain.Node{
		{MachineID: "m1", Class: domain.Standard, GPUs: 8, CreatedAt: t0.Add(30 * time.Minute), RemovedAt: t0.Add(150 * time.Minute)},
		{MachineID: "m2", Class: domain.Preemptible, GPUs: 8, CreatedAt: t0.Add(2 * time.Hour)},
		{MachineID: "x", Class: domain.Standard, GPUs: 8, CreatedAt: t0},
	}
	got := Lendable(ns, ms, "r", "H100", t0.Add(10*time.Minute), t0.Add(4*time.Hour))
	// Hour 0: 8 GPUs, a standard node from :30 (4 left on average);
	// hour 1: m2 from :30 (+4), the node all hour: 4; hour 2: 16 less the
	// node to :30: 12; hour 3: 16.
	want := []float64{4, 4, 12, 16}
	if len(got) != len(want) {
		t.Fatalf("hours %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hour %d: %v GPUs, want %v (all %v)", i, got[i], want[i], got)
		}
	}
}

// TestAWeeklyPatternIsForecast: a pool busy in weekday working hours is
// forecast busy then and free otherwise, with an interval of width 0
// when every week was the same.
func TestAWeeklyPatternIsForecast(t *testing.T) {
	hist := make([]float64, 4*7*24)
	for i := range hist {
		at := t0.Add(time.Duration(i) * time.Hour)
		hist[i] = 64
		if at.Weekday() != time.Saturday && at.Weekday() != time.Sunday && at.Hour() >= 9 && at.Hour() < 17 {
			hist[i] = 16
		}
	}
	start := t0.Add(4 * 7 * 24 * time.Hour)
	hs := Of(hist, t0, start, 48)
	if len(hs) != 48 || hs[0].Samples != 4*5-2 { // Monday 00:00: the 2 hours before history's start are missing
		t.Fatalf("%d hours, first with %d samples", len(hs), hs[0].Samples)
	}
	for _, h := range hs {
		switch hr := h.Start.Hour(); {
		case hr >= 11 && hr < 15: // two hours from either edge: all samples busy
			if h.Expected != 16 || h.Low != 16 || h.High != 16 {
				t.Errorf("%s: %+v, want 16 for certain", h.Start, h)
			}
		case hr < 7 || hr >= 19:
			if h.Expected != 64 || h.Low != 64 || h.High != 64 {
				t.Errorf("%s: %+v, want 64 for certain", h.Start, h)
			}
		default: // at an edge the interval spans both
			if h.Low != 16 || h.High != 64 {
				t.Errorf("%s: %+v, want the interval [16, 64]", h.Start, h)
			}
		}
	}
}

// TestTheIntervalHoldsNineTimesInTen: on a history of independent hours
// the 90% interval holds for about 90% of the hours that follow.
func TestTheIntervalHoldsNineTimesInTen(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func() float64 { return float64(rng.IntN(100)) + rng.Float64() }
	hist := make([]float64, 4*7*24)
	for i := range hist {
		hist[i] = draw()
	}
	var total float64
	const trials = 40
	for range trials {
		hs := Of(hist, t0, t0.Add(4*7*24*time.Hour+24*time.Hour), 168)
		actual := make([]float64, len(hs))
		for i := range actual {
			actual[i] = draw()
		}
		total += Coverage(hs, actual)
	}
	if c := total / trials; c < 0.86 || c > 0.95 {
		t.Errorf("the 90%% interval held in %.1f%% of the hours", 100*c)
	}
}

func TestSummariseOrderStatistics(t *testing.T) {
	s := make([]float64, 40)
	for i := range s {
		s[i] = float64(40 - i)
	}
	h := summarise(t0, s)
	// 40 samples: the 2nd from each end (41-4)/41 = 90.2%.
	if h.Low != 2 || h.High != 39 || h.Expected != 20.5 || h.Samples != 40 {
		t.Errorf("%+v", h)
	}
	if h := summarise(t0, []float64{5}); h.Low != 5 || h.High != 5 || h.Expected != 5 {
		t.Errorf("one sample: %+v", h)
	}
	if h := summarise(t0, nil); h.Samples != 0 || h.High != 0 {
		t.Errorf("no sample: %+v", h)
	}
}
