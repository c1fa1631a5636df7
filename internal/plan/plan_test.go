package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var h100 = Market{OnDemand: 2.99, Discount: 0.5, Window: 5 * time.Minute}

func job8(hours float64) Job {
	return Job{GPUHours: hours * 8, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 10 * time.Minute}
}

// TestFormulaAgainstMonteCarlo: at the seed's rates (0.8, 2.3, 4.1 %/h)
// the formula's overhead is within 10% of what running the job against
// Poisson reclaims measures, with Daly's interval, a fixed one and a
// notice checkpoint.
func TestFormulaAgainstMonteCarlo(t *testing.T) {
	for _, rate := range []float64{0.8, 2.3, 4.1} {
		for _, c := range []struct {
			name string
			job  Job
		}{
			{"daly", job8(200)},
			{"every-30m", func() Job { j := job8(200); j.Interval = 30 * time.Minute; return j }()},
			{"notice", func() Job { j := job8(200); j.CheckpointAtNotice = true; return j }()},
			{"gang-of-4", func() Job { j := job8(200); j.GPUs, j.GPUHours = 32, 200*32; return j }()},
		} {
			m := h100
			m.RatePercentPerHour = rate
			r := Make(c.job, m, 4000, PoissonRuns(c.job, m, 1))
			e := r.Expectation
			mc := r.Preemptible.ExpectedHours/e.StandardHours - 1
			t.Logf("%.1f%%/h %-10s interval %-8s formula %.4f, Monte Carlo %.4f (%+.1f%%)", rate, c.name, e.Interval.Round(time.Second), e.Overhead, mc, 100*(mc/e.Overhead-1))
			if math.Abs(mc/e.Overhead-1) > 0.10 {
				t.Errorf("%.1f%%/h %s: formula %.4f, Monte Carlo %.4f: more than 10%% apart", rate, c.name, e.Overhead, mc)
			}
		}
	}
}

// TestBreakEven: at the break-even rate preemptible costs what standard
// does; below it less.
func TestBreakEven(t *testing.T) {
	j := job8(100)
	j.GPUs, j.GPUHours = 64, 6400
	e := Expect(j, h100)
	m := h100
	m.RatePercentPerHour = e.BreakEvenRatePercentPerHour
	at := Expect(j, m)
	if math.Abs(at.Cost/at.StandardCost-1) > 1e-6 {
		t.Errorf("at the break-even rate %g%%/h preemptible costs %g, standard %g", m.RatePercentPerHour, at.Cost, at.StandardCost)
	}
	m.RatePercentPerHour /= 2
	if below := Expect(j, m); below.Cost >= below.StandardCost {
		t.Errorf("at half the break-even rate preemptible costs %g, standard %g", below.Cost, below.StandardCost)
	}
	j.CheckpointAtNotice = true
	j.RestartCost = 0
	j.CheckpointCost = 0
	if e := Expect(j, h100); !math.IsInf(e.BreakEvenRatePercentPerHour, 1) {
		t.Errorf("a job that loses nothing breaks even at %g%%/h", e.BreakEvenRatePercentPerHour)
	}
}

// markov is an availability trace in SkyPilot's format: a two-state chain
// (up about upShare of the time, spells of about spell ticks).
func markov(seed uint64, ticks, gap int, upShare float64, spell int, nodes int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	up := true
	var b strings.Builder
	fmt.Fprintf(&b, `{"metadata": {"gap_seconds": %d}, "data": [`, gap)
	for i := range ticks {
		if i > 0 {
			b.WriteString(", ")
		}
		leave := 1 / float64(spell)
		if up {
			leave *= (1 - upShare) / upShare
		}
		if r.Float64() < leave {
			up = !up
		}
		n := 0
		if up {
			n = nodes
		}
		fmt.Fprint(&b, n)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestDeadlinePlanOnATrace: on an availability trace in SkyPilot's
// format, the plan meets the deadline in every run and costs less than
// standard nodes only; greedy (preemptible until it is too late) costs
// less still but misses; on-demand only always meets and costs the most.
func TestDeadlinePlanOnATrace(t *testing.T) {
	a, err := ReadSkyPilot(bytes.NewReader(markov(3, 12*24*14, 300, 0.6, 24, 1)))
	if err != nil {
		t.Fatal(err)
	}
	j := Job{GPUHours: 48 * 8, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 12 * time.Minute, Deadline: 70 * time.Hour}
	m := h100
	m.RatePercentPerHour = a.RatePercentPerHour(1)
	r := Make(j, m, 400, TraceRuns(a, j.GPUs, 400))
	d := r.Deadline
	b, _ := json.MarshalIndent(r, "", " ")
	t.Logf("trace up %.0f%% of %s, %.2f%%/h: %s", 100*a.UpShare(1), a.Duration(), m.RatePercentPerHour, b)
	if d.Plan.MeetProbability != 1 || d.Plan.ExpectedCost >= d.StandardCost || d.Plan.MovedShare == 0 {
		t.Errorf("plan %+v against standard %g", d.Plan, d.StandardCost)
	}
	if d.Greedy.MeetProbability >= d.Plan.MeetProbability {
		t.Errorf("greedy met the deadline as often (%g) as the plan (%g)", d.Greedy.MeetProbability, d.Plan.MeetProbability)
	}
	if !d.StandardMeets {
		t.Error("standard nodes alone miss a deadline the work fits in")
	}
	if !strings.Contains(r.Advice, "move to standard nodes when the slack runs out") {
		t.Errorf("advice %q", r.Advice)
	}
}

func TestPoissonDeadlinePlan(t *testing.T) {
	j := job8(48)
	j.Deadline = 52 * time.Hour
	m := h100
	m.RatePercentPerHour = 4.1
	r := Make(j, m, 2000, PoissonRuns(j, m, 2))
	d := r.Deadline
	t.Logf("plan %+v\ngreedy %+v\nstandard %g", d.Plan, d.Greedy, d.StandardCost)
	if d.Plan.MeetProbability != 1 || d.Plan.ExpectedCost >= d.StandardCost {
		t.Errorf("plan %+v against standard %g", d.Plan, d.StandardCost)
	}
	if d.Greedy.MeetProbability >= 1 {
		t.Errorf("greedy %+v never missed", d.Greedy)
	}
	// The same seed, the same plan.
	again := Make(j, m, 2000, PoissonRuns(j, m, 2))
	if a, b := mustJSON(t, again), mustJSON(t, r); a != b {
		t.Error("the same seed gave another plan")
	}
}

func TestReadSkyPilotRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{`, "not SkyPilot's format"},
		{`{"data": [1]}`, "gap_seconds is missing"},
		{`{"metadata": {"gap_seconds": 0}, "data": [1]}`, "between 1 and 86400"},
		{`{"metadata": {"gap_seconds": 60}, "data": []}`, "1 to 2000000 ticks"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1, -1]}`, "data[1] is -1"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1.5]}`, "data[0] is 1.5"},
	} {
		if _, err := ReadSkyPilot(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.in, err, c.want)
		}
	}
}

func FuzzReadSkyPilot(f *testing.F) {
	f.Add([]byte(`{"metadata": {"gap_seconds": 300}, "data": [0, 16, 16, 8]}`))
	f.Add(markov(1, 50, 600, 0.5, 5, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadSkyPilot(bytes.NewReader(b))
		if err != nil {
			return
		}
		if a.Gap < time.Second || len(a.Counts) == 0 {
			t.Fatalf("read %v", a)
		}
		// Any trace plans without hanging.
		j := Job{GPUHours: 8, GPUs: 8, CheckpointCost: time.Second, Deadline: 10 * time.Hour}
		Make(j, h100, 4, TraceRuns(a, 8, 4))
	})
}

func TestCheck(t *testing.T) {
	good := job8(10)
	if err := Check(good, h100); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*Job, *Market){
		func(j *Job, _ *Market) { j.GPUHours = 0 },
		func(j *Job, _ *Market) { j.GPUHours = math.NaN() },
		func(j *Job, _ *Market) { j.GPUs = 12 },
		func(j *Job, _ *Market) { j.CheckpointCost = -time.Second },
		func(j *Job, _ *Market) { j.Deadline = 400 * 24 * time.Hour },
		func(_ *Job, m *Market) { m.RatePercentPerHour = -1 },
		func(_ *Job, m *Market) { m.RatePercentPerHour = math.NaN() },
		func(_ *Job, m *Market) { m.Discount = 1 },
	} {
		j, m := good, h100
		bad(&j, &m)
		if err := Check(j, m); err == nil {
			t.Errorf("%+v %+v accepted", j, m)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAlwaysPays: a break-even rate past any real pool's (RealRate) says
// preemptible always pays, as none at all does; one a pool can have, or
// one at or below the rate planned with, does not.
func TestAlwaysPays(t *testing.T) {
	cheap := Job{GPUHours: 384, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 12 * time.Minute}
	m := h100
	m.RatePercentPerHour = 24.5
	e := Expect(cheap, m)
	if !(e.BreakEvenRatePercentPerHour > RealRate && !math.IsInf(e.BreakEvenRatePercentPerHour, 1)) || !e.AlwaysPays {
		t.Errorf("break-even %g %%/h: always pays %v", e.BreakEvenRatePercentPerHour, e.AlwaysPays)
	}
	gang := job8(100)
	gang.GPUs, gang.GPUHours = 32, 4000
	if e := Expect(gang, m); e.BreakEvenRatePercentPerHour > RealRate || e.AlwaysPays {
		t.Errorf("a gang of 4 breaks even at %g %%/h: always pays %v", e.BreakEvenRatePercentPerHour, e.AlwaysPays)
	}
	m.RatePercentPerHour = e.BreakEvenRatePercentPerHour + 1
	if e := Expect(cheap, m); e.AlwaysPays {
		t.Errorf("at %g %%/h, past its break-even of %g, preemptible always pays", m.RatePercentPerHour, e.BreakEvenRatePercentPerHour)
	}
	free := Job{GPUHours: 80, GPUs: 8, CheckpointAtNotice: true}
	if e := Expect(free, h100); !math.IsInf(e.BreakEvenRatePercentPerHour, 1) || !e.AlwaysPays {
		t.Errorf("a job that loses nothing: %+v", e)
	}
}
