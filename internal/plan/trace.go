package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// Availability is a recorded trace of preemptible capacity: how many
// instances (nodes) were available at each tick, Gap apart.
type Availability struct {
	Gap    time.Duration
	Counts []int
}

// Limits of a trace.
const (
	maxTraceBytes = 16 << 20
	maxTicks      = 2_000_000
)

// ReadSkyPilot reads an availability trace in SkyPilot's format
// (skypilot-org/spot-traces): {"metadata":{"gap_seconds":N},"data":[...]},
// each datum the instances available at that tick. Bounded: at most 16
// MiB, two million ticks, a gap of 1 s to a day, counts from 0 to a
// million.
func ReadSkyPilot(r io.Reader) (Availability, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTraceBytes+1))
	if err != nil {
		return Availability{}, err
	}
	if len(b) > maxTraceBytes {
		return Availability{}, fmt.Errorf("trace: larger than %d bytes", maxTraceBytes)
	}
	var t struct {
		Metadata struct {
			Gap *float64 `json:"gap_seconds"`
		} `json:"metadata"`
		Data []float64 `json:"data"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return Availability{}, fmt.Errorf("trace: not SkyPilot's format: %w", err)
	}
	switch g := t.Metadata.Gap; {
	case g == nil:
		return Availability{}, fmt.Errorf("trace: metadata.gap_seconds is missing")
	case !(*g >= 1 && *g <= 86400):
		return Availability{}, fmt.Errorf("trace: metadata.gap_seconds must be between 1 and 86400; got %g", *g)
	case len(t.Data) == 0 || len(t.Data) > maxTicks:
		return Availability{}, fmt.Errorf("trace: data must hold 1 to %d ticks; got %d", maxTicks, len(t.Data))
	}
	a := Availability{Gap: time.Duration(*t.Metadata.Gap * float64(time.Second)), Counts: make([]int, len(t.Data))}
	for i, v := range t.Data {
		if !(v >= 0 && v <= 1e6) || v != math.Trunc(v) {
			return Availability{}, fmt.Errorf("trace: data[%d] is %g, not a count from 0 to 1000000", i, v)
		}
		a.Counts[i] = int(v)
	}
	return a, nil
}

// Duration is the trace's length.
func (a Availability) Duration() time.Duration { return a.Gap * time.Duration(len(a.Counts)) }

// UpShare is the share of ticks with at least nodes available.
func (a Availability) UpShare(nodes int) float64 {
	up := 0
	for _, c := range a.Counts {
		if c >= nodes {
			up++
		}
	}
	return float64(up) / float64(len(a.Counts))
}

// RatePercentPerHour is the trace's preemption rate for a gang of nodes:
// interruptions (available to not) per hour available, in percent, the
// unit of Market.RatePercentPerHour. 0 if it never ran or never stopped.
func (a Availability) RatePercentPerHour(nodes int) float64 {
	up, stops := 0, 0
	for i, c := range a.Counts {
		if c >= nodes {
			up++
			if next := a.Counts[(i+1)%len(a.Counts)]; next < nodes {
				stops++
			}
		}
	}
	if up == 0 {
		return 0
	}
	return 100 * float64(stops) / (float64(up) * a.Gap.Hours())
}

// tracePos replays an availability trace from a tick on, cyclically: the
// gang runs while at least nodes instances are available; a tick with
// fewer interrupts it.
type tracePos struct {
	a      Availability
	nodes  int
	offset int
	gap    float64
}

func (p *tracePos) up(k int) bool { return p.a.Counts[(p.offset+k)%len(p.a.Counts)] >= p.nodes }

func (p *tracePos) NextStop(t float64) float64 {
	k := int(t / p.gap)
	for i := 1; i <= len(p.a.Counts); i++ {
		if !p.up(k + i) {
			return float64(k+i) * p.gap
		}
	}
	return math.Inf(1)
}

func (p *tracePos) NextUp(t float64) float64 {
	k := int(t / p.gap)
	if p.up(k) {
		return t
	}
	for i := 1; i <= len(p.a.Counts); i++ {
		if p.up(k + i) {
			return float64(k+i) * p.gap
		}
	}
	return math.Inf(1)
}

// TraceRuns makes the processes of n runs of a gang of gpus GPUs on the
// trace, each starting at another tick, spread evenly over it.
func TraceRuns(a Availability, gpus, n int) func(i int) Process {
	return func(i int) Process {
		return &tracePos{a: a, nodes: gpus / GPUsPerNode, offset: i * len(a.Counts) / n, gap: a.Gap.Seconds()}
	}
}
