package simulate

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
)

// Event is one change of demand: cluster Cluster (a name unique in the
// run) of class Class asks for GPUs GPUs from At on; the first event of a
// cluster creates it, 0 GPUs deletes it.
type Event struct {
	At              time.Duration
	Cluster         string
	Region, GPUType string
	Class           domain.ComputeClass
	GPUs            int
	// Weight of a preemptible cluster's fair share, set when it is made
	// (0: the default, 1).
	Weight int
	// Standard GPUs a preemptible cluster holds from its creation: a
	// scenario's tenants hold one standard node, as the API requires of
	// every cluster; a trace's preemptible demand none.
	Standard int
	// StartsAt, after At: the standard cluster is booked at At to start
	// then (on_demand.booked_ahead).
	StartsAt time.Duration
	// Types are the GPU types a preemptible cluster's target may be of,
	// in order (none: its own).
	Types []string
}

// ClusterName makes s a name the API takes for a cluster (lowercase
// letters, digits and '-', at most 63): a simulated demand's clusters
// can then be replayed through a server as they are (see the fidelity
// test).
func ClusterName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b[:min(len(b), 63)]), "-")
}

// Generate draws the scenario's demand from its seed: Tenants.Count
// preemptible clusters in every region and GPU type of the fleet from the
// start, and in every on-demand pool standard clusters arriving as a
// Poisson process, each living an exponential time.
func Generate(s Scenario) []Event {
	r := rand.New(rand.NewPCG(s.Seed, s.Seed^0x5eed))
	var evs []Event
	for _, k := range offers(s.Fleet) {
		for i := range s.Tenants.Count {
			e := Event{Cluster: ClusterName(fmt.Sprintf("tenant-%d-%s-%s", i+1, k.region, k.gpu)), Region: k.region, GPUType: k.gpu,
				Class: domain.Preemptible, GPUs: s.Tenants.TargetGPUs, Standard: domain.GPUStep}
			if ws := s.Tenants.Weights; len(ws) > 0 {
				e.Weight = ws[i%len(ws)]
			}
			e.Types = tenantTypes(s, k)
			evs = append(evs, e)
		}
	}
	od := s.OnDemand
	if od.ArrivalsPerHour > 0 {
		for _, k := range offers(s.Fleet) {
			if !k.onDemand {
				continue
			}
			n := 0
			for at := expo(r, time.Hour, od.ArrivalsPerHour); at < s.Horizon.D && len(evs) < MaxEvents-1; at += expo(r, time.Hour, od.ArrivalsPerHour) {
				n++
				name := ClusterName(fmt.Sprintf("od-%s-%s-%d", k.region, k.gpu, n))
				gpus := od.GPUs[r.IntN(len(od.GPUs))]
				e := Event{At: at, Cluster: name, Region: k.region, GPUType: k.gpu, Class: domain.Standard, GPUs: gpus}
				if od.BookedAhead.D > 0 {
					e.At, e.StartsAt = max(at-od.BookedAhead.D, 0), at
				}
				evs = append(evs, e)
				if end := at + expo(r, od.MeanLifetime.D, 1); end < s.Horizon.D {
					evs = append(evs, Event{At: end, Cluster: name, Region: k.region, GPUType: k.gpu, Class: domain.Standard})
				}
			}
		}
	}
	sortEvents(evs)
	return evs
}

// tenantTypes are the GPU types the target of a tenant of offer k may
// be of: its own, then those of Tenants.PreemptibleGPUTypes its region
// has (none when that is its own alone).
func tenantTypes(s Scenario, k offer) []string {
	types := []string{k.gpu}
	for _, g := range s.Tenants.PreemptibleGPUTypes {
		has := slices.ContainsFunc(offers(s.Fleet), func(o offer) bool { return o.region == k.region && o.gpu == g })
		if has && !slices.Contains(types, g) {
			types = append(types, g)
		}
	}
	if len(types) == 1 {
		return nil
	}
	return types
}

// expo draws an exponential time with rate per `unit`, whole seconds.
func expo(r *rand.Rand, unit time.Duration, rate float64) time.Duration {
	d := time.Duration(r.ExpFloat64() / rate * float64(unit))
	return max(d.Round(time.Second), time.Second)
}

// sortEvents orders events by time, keeping the order of equal times.
func sortEvents(evs []Event) {
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
}

// offer is a region and GPU type of the fleet.
type offer struct {
	region, gpu string
	onDemand    bool // it has an on-demand pool
}

// offers lists the fleet's regions and GPU types in file order.
func offers(f fleet.File) []offer {
	var out []offer
	idx := map[[2]string]int{}
	for _, p := range f.Pools {
		k := [2]string{p.Region, p.GPUType}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, offer{region: p.Region, gpu: p.GPUType})
		}
		if p.ReservedFor == "" {
			out[i].onDemand = true
		}
	}
	return out
}

// TraceHeader is the first line of a trace in sparecap's format.
const TraceHeader = "at,cluster,region,gpu_type,class,gpus"

// maxTraceLine bounds a trace's line.
const maxTraceLine = 1024

// ReadTrace reads a trace in sparecap's format: a CSV file whose header is
// TraceHeader and whose rows say that from `at` (seconds since the start,
// or a duration such as "90m") the cluster asks for `gpus` GPUs of its
// class (standard or preemptible); a cluster's first row creates it in
// its region and GPU type, a row with 0 GPUs deletes it. Rows must come in
// time order. Every field is checked; an error names the line.
func ReadTrace(rd io.Reader) ([]Event, error) {
	cr := csv.NewReader(&lineBound{r: newBufReader(rd)})
	cr.FieldsPerRecord = 6
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("trace: read the header: %w", err)
	}
	if strings.Join(head, ",") != TraceHeader {
		return nil, fmt.Errorf("trace: the header must be %q", TraceHeader)
	}
	var evs []Event
	seen := map[string]Event{}
	err = eachRow(cr, "trace", MaxEvents, func(line int, rec []string) error {
		e, err := traceRow(rec)
		if err != nil {
			return err
		}
		if n := len(evs); n > 0 && e.At < evs[n-1].At {
			return fmt.Errorf("at %s comes before the line above (%s): rows must be in time order", e.At, evs[n-1].At)
		}
		if prev, ok := seen[e.Cluster]; ok && (prev.Region != e.Region || prev.GPUType != e.GPUType || prev.Class != e.Class) {
			return fmt.Errorf("cluster %s was %s %s %s before", e.Cluster, prev.Region, prev.GPUType, prev.Class)
		}
		seen[e.Cluster] = e
		evs = append(evs, e)
		return nil
	})
	return evs, err
}

// eachRow calls fn with each row after the header and its line number,
// at most max rows; an error names what is read and the line.
func eachRow(cr *csv.Reader, what string, max int, fn func(line int, rec []string) error) error {
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if line-1 > max {
			return fmt.Errorf("%s: more than %d rows", what, max)
		}
		if err := fn(line, rec); err != nil {
			return fmt.Errorf("%s line %d: %w", what, line, err)
		}
	}
}

// traceRow parses one row.
func traceRow(rec []string) (Event, error) {
	at, err := traceTime(rec[0])
	if err != nil {
		return Event{}, err
	}
	e := Event{At: at, Cluster: rec[1], Region: rec[2], GPUType: rec[3], Class: domain.ComputeClass(rec[4])}
	for _, f := range []struct{ name, v string }{{"cluster", e.Cluster}, {"region", e.Region}, {"gpu_type", e.GPUType}} {
		if !domain.ValidName(f.v) {
			return Event{}, fmt.Errorf("%s %q is not a valid name (letters, digits, '-' and '_', at most 63)", f.name, trim(f.v))
		}
	}
	if e.Class != domain.Standard && e.Class != domain.Preemptible {
		return Event{}, fmt.Errorf("class %q is neither %s nor %s", trim(rec[4]), domain.Standard, domain.Preemptible)
	}
	g, err := strconv.Atoi(rec[5])
	if err != nil {
		return Event{}, fmt.Errorf("gpus %q is not a whole number", trim(rec[5]))
	}
	if err := checkGPUs("gpus", g, true); err != nil {
		return Event{}, err
	}
	e.GPUs = g
	return e, nil
}

// traceTime reads seconds since the start or a duration.
func traceTime(s string) (time.Duration, error) {
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "eEnN") {
		if f < 0 || f > MaxHorizon.Seconds() {
			return 0, fmt.Errorf("at %q is outside 0 to %s", trim(s), MaxHorizon)
		}
		d = time.Duration(math.Round(f * float64(time.Second)))
	} else if d, err = time.ParseDuration(s); err != nil || d < 0 || d > MaxHorizon {
		return 0, fmt.Errorf("at %q is neither seconds nor a duration from 0 to %s", trim(s), MaxHorizon)
	}
	return d, nil
}

// trim bounds a field echoed in an error.
func trim(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)[1 : len(strconv.Quote(s))-1]
}

func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64<<10) }

// lineBound fails a read whose line runs past maxTraceLine bytes, so a
// trace without line breaks is not read whole into one field.
type lineBound struct {
	r   *bufio.Reader
	run int
}

func (l *lineBound) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.run = 0
			continue
		}
		if l.run++; l.run > maxTraceLine {
			return 0, fmt.Errorf("a line is longer than %d bytes", maxTraceLine)
		}
	}
	return n, err
}
