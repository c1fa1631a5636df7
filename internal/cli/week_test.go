package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/stats"
)

// TestStatsWeek: the grid shows each hour of the week's rate per 100
// node-hours ("." without enough service), the forecast its coming hours,
// and a short history says so; the pool is required and nothing is sent
// without it.
func TestStatsWeek(t *testing.T) {
	w := apiv1.WeekStats{Region: "us-central-2", GPUType: "H100", From: t0.Add(-28 * 24 * time.Hour), To: t0,
		Note: "only 3.0 days of history (14 needed): the hours of the week are not a pattern yet", Hours: make([]apiv1.WeekHour, 168)}
	for h := range w.Hours {
		w.Hours[h] = apiv1.WeekHour{HourOfWeek: h, Day: []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}[h/24], Hour: h % 24}
	}
	w.Hours[9] = apiv1.WeekHour{HourOfWeek: 9, Day: "Mon", Hour: 9, NodeHours: 100, Preemptions: 5, Rate: 0.05, RateLow: 0.016, RateHigh: 0.117, MeanNodes: 25, Enough: true}
	next := t0.Truncate(time.Hour).Add(time.Hour)
	w.Forecast = []apiv1.ForecastHour{{Start: next, WeekHour: w.Hours[stats.HourOfWeek(next)]}}
	f := newFakeAPI(t)
	f.handle("GET /v1/stats/preemptions/week", 200, w)
	r := f.run("stats", "week", "--region", "us-central-2", "--gpu-type", "H100", "--ahead", "1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(r.stdout, "\n")
	if !strings.Contains(r.stdout, "Too little history: only 3.0 days") || !strings.HasPrefix(lines[4], "DAY") || !strings.HasPrefix(lines[5], "Mon") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if mon := strings.Fields(lines[5]); len(mon) != 25 || mon[10] != "5.0" || mon[1] != "." {
		t.Fatalf("Monday's row %q: want 5.0 at 09:00 and . elsewhere", lines[5])
	}
	if q := f.only("GET", "/v1/stats/preemptions/week")[0].Query; q != "ahead=1&gpu_type=H100&region=us-central-2" {
		t.Fatalf("query %q", q)
	}
	for _, bad := range [][]string{{"--region", "us-central-2"}, {"--region", "x", "--gpu-type", "y", "--ahead", "200"}} {
		if r := f.run(append([]string{"stats", "week"}, bad...)...); r.err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if n := len(f.only("GET", "/v1/stats/preemptions/week")); n != 1 {
		t.Fatalf("refused flags were sent: %d requests", n)
	}
}
