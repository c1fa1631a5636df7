package simulate

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
)

// Trace formats ReadTraceAs reads.
const (
	// FormatSparecap is sparecap's own (ReadTrace).
	FormatSparecap = "sparecap"
	// FormatAlibaba2023 is the pod list of Alibaba's cluster-trace-gpu-v2023
	// (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
	// creation_time,deletion_time,scheduled_time).
	FormatAlibaba2023 = "alibaba-gpu-2023"
	// FormatAlibaba2026 is the job list of Alibaba's
	// cluster-trace-v2026-spot-gpu (job_name,organization,gpu_model,
	// cpu_request,gpu_request,worker_num,submit_time,duration,job_type).
	FormatAlibaba2026 = "alibaba-spot-2026"
)

// AlibabaRegion is the region an Alibaba trace's demand and fleet are in.
const AlibabaRegion = "alibaba"

// Formats lists the trace formats, for help and errors.
var Formats = []string{FormatSparecap, FormatAlibaba2023, FormatAlibaba2026}

// ReadTraceAs reads a trace in one of Formats, to be replayed on fleet fl.
// Alibaba's traces list pods or jobs; their GPUs are summed per class and
// GPU type (latency-sensitive and guaranteed pods, and HP jobs, are
// standard; best-effort and burstable pods, and Spot jobs, preemptible)
// into one cluster each, in AlibabaRegion, whose size follows the sum
// rounded up to whole 8-GPU nodes; times are shifted so the trace starts
// at 0. A pod or job that accepts several GPU types (an empty type: any
// of fl's in AlibabaRegion; "A|B": either) is placed at its arrival on
// the first of them with room (see place).
//
// For Alibaba's traces it also says what the rows ask as they are, before
// whole nodes (nil for sparecap's format, whose rows are the demand).
func ReadTraceAs(format string, r io.Reader, fl fleet.File) ([]Event, *TraceAsk, error) {
	switch format {
	case FormatSparecap, "":
		evs, err := ReadTrace(r)
		return evs, nil, err
	case FormatAlibaba2023:
		return readAlibaba(r, alibaba2023, fl)
	case FormatAlibaba2026:
		return readAlibaba(r, alibaba2026, fl)
	}
	return nil, nil, fmt.Errorf("unknown trace format %q: use one of %s", trim(format), strings.Join(Formats, ", "))
}

// usage is one pod's or job's GPUs over [from, to) (to < 0: to the end),
// of any of the types anyOf (none: any type of the fleet).
type usage struct {
	from, to float64
	class    domain.ComputeClass
	anyOf    []string
	gpus     int
}

// alibabaFormat is one of Alibaba's CSV layouts.
type alibabaFormat struct {
	name   string
	header []string
	row    func(f map[string]string) (usage, bool, error)
}

var alibaba2023 = alibabaFormat{name: FormatAlibaba2023,
	header: []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"},
	row: func(f map[string]string) (usage, bool, error) {
		gpus, err := count(f["num_gpu"], "num_gpu")
		if err != nil || gpus == 0 || f["scheduled_time"] == "" {
			return usage{}, false, err // no GPU, or never ran
		}
		u := usage{anyOf: gpuSpec(f["gpu_spec"]), gpus: gpus, to: -1}
		switch f["qos"] {
		case "LS", "Guaranteed":
			u.class = domain.Standard
		case "BE", "Burstable":
			u.class = domain.Preemptible
		default:
			return usage{}, false, fmt.Errorf("qos %q is none of LS, Guaranteed, BE, Burstable", trim(f["qos"]))
		}
		if u.from, err = seconds(f["creation_time"], "creation_time"); err != nil {
			return usage{}, false, err
		}
		if f["deletion_time"] != "" {
			if u.to, err = seconds(f["deletion_time"], "deletion_time"); err != nil {
				return usage{}, false, err
			}
		}
		return u, true, nil
	}}

var alibaba2026 = alibabaFormat{name: FormatAlibaba2026,
	header: []string{"job_name", "organization", "gpu_model", "cpu_request", "gpu_request", "worker_num", "submit_time", "duration", "job_type"},
	row: func(f map[string]string) (usage, bool, error) {
		per, err := strconv.ParseFloat(f["gpu_request"], 64)
		if err != nil || !(per >= 0 && per <= 1024) {
			return usage{}, false, fmt.Errorf("gpu_request %q is not a number of GPUs from 0 to 1024", trim(f["gpu_request"]))
		}
		workers, err := count(f["worker_num"], "worker_num")
		if err != nil {
			return usage{}, false, err
		}
		gpus := int(math.Ceil(per * float64(workers)))
		if gpus == 0 {
			return usage{}, false, nil
		}
		u := usage{anyOf: gpuSpec(f["gpu_model"]), gpus: gpus}
		switch f["job_type"] {
		case "HP":
			u.class = domain.Standard
		case "Spot":
			u.class = domain.Preemptible
		default:
			return usage{}, false, fmt.Errorf("job_type %q is neither HP nor Spot", trim(f["job_type"]))
		}
		if u.from, err = seconds(f["submit_time"], "submit_time"); err != nil {
			return usage{}, false, err
		}
		d, err := seconds(f["duration"], "duration")
		if err != nil {
			return usage{}, false, err
		}
		u.to = u.from + d
		return u, true, nil
	}}

// readAlibaba reads one of Alibaba's layouts into demand.
func readAlibaba(r io.Reader, af alibabaFormat, fl fleet.File) ([]Event, *TraceAsk, error) {
	cr := csv.NewReader(&lineBound{r: newBufReader(r)})
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("%s trace: read the header: %w", af.name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, h := range af.header {
		if _, ok := col[h]; !ok {
			return nil, nil, fmt.Errorf("%s trace: the header lacks %q (want %s)", af.name, h, strings.Join(af.header, ","))
		}
	}
	var us []usage
	f := map[string]string{}
	err = eachRow(cr, af.name+" trace", 4*MaxEvents, func(_ int, rec []string) error {
		for _, h := range af.header {
			f[h] = ""
			if i := col[h]; i < len(rec) {
				f[h] = strings.TrimSpace(rec[i])
			}
		}
		u, ok, err := af.row(f)
		if ok && len(us) >= MaxEvents/2 {
			return fmt.Errorf("more than %d rows with GPUs", MaxEvents/2)
		}
		if ok {
			us = append(us, u)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return aggregate(us, fleetTypes(fl)), askOf(us), nil
}

// aggregate turns usages into the demand of one cluster per class and
// GPU type, following their summed GPUs in whole nodes; each usage goes
// to the type place chooses at its arrival.
func aggregate(us []usage, types []fleetType) []Event {
	if len(us) == 0 {
		return nil
	}
	start := math.Inf(1)
	for _, u := range us {
		start = math.Min(start, u.from)
	}
	type change struct {
		at  float64
		u   int
		end bool
	}
	var cs []change
	for i, u := range us {
		cs = append(cs, change{u.from - start, i, false})
		if u.to >= u.from {
			cs = append(cs, change{u.to - start, i, true})
		}
	}
	slices.SortStableFunc(cs, func(a, b change) int { return cmp.Compare(a.at, b.at) })
	pl := newPlacer(types)
	on := make([]string, len(us)) // the type each usage was placed on
	size := map[[2]string]int{}
	var evs []Event
	for _, c := range cs {
		u := us[c.u]
		delta := u.gpus
		if c.end {
			delta = -delta
		} else {
			on[c.u] = pl.place(u)
		}
		k := [2]string{string(u.class), on[c.u]}
		pl.sum[k] += delta
		nodes := pl.nodes(k)
		if nodes == size[k] {
			continue
		}
		size[k] = nodes
		at := time.Duration(math.Min(c.at, MaxHorizon.Seconds()) * float64(time.Second)).Round(time.Second)
		evs = append(evs, Event{At: at, Cluster: clusterName(u.class, k[1]), Region: AlibabaRegion, GPUType: k[1], Class: u.class, GPUs: nodes})
	}
	return evs
}

// clusterName is the aggregated cluster of a class and GPU type.
func clusterName(class domain.ComputeClass, gpu string) string {
	return ClusterName("alibaba-" + string(class) + "-" + gpu)
}

// gpuName makes a GPU model a valid name ("GPU-" before one that does not
// start with a letter or digit, "GPU" when the trace has none).
func gpuName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	n := b.String()
	if n == "" {
		return "GPU"
	}
	if !domain.ValidName(n) {
		n = "GPU-" + n // a name starts with a letter or a digit
	}
	if !domain.ValidName(n) {
		return "GPU"
	}
	return n
}

// gpuSpec reads a trace's GPU type: "" is any (nil), "A|B" either.
func gpuSpec(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, p := range strings.SplitN(s, "|", maxAnyOf+1)[:min(strings.Count(s, "|")+1, maxAnyOf)] {
		if n := gpuName(strings.TrimSpace(p)); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func count(s, field string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 100_000 {
		return 0, fmt.Errorf("%s %q is not a count from 0 to 100000", field, trim(s))
	}
	return n, nil
}

func seconds(s, field string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(math.Abs(f) <= 1e11) {
		return 0, fmt.Errorf("%s %q is not a time in seconds", field, trim(s))
	}
	return f, nil
}

// ReadAlibabaNodes reads an Alibaba node list (2023: sn,cpu_milli,
// memory_mib,gpu,model; 2026: gpu_model,gpu_capacity_num,cpu_num,
// node_name) into a fleet in AlibabaRegion: per GPU model, as many 8-GPU
// machines as its GPUs fill.
func ReadAlibabaNodes(format string, r io.Reader) (fleet.File, error) {
	var model, gpus string
	switch format {
	case FormatAlibaba2023:
		model, gpus = "model", "gpu"
	case FormatAlibaba2026:
		model, gpus = "gpu_model", "gpu_capacity_num"
	default:
		return fleet.File{}, fmt.Errorf("node lists are read for %s and %s, not %q", FormatAlibaba2023, FormatAlibaba2026, trim(format))
	}
	cr := csv.NewReader(&lineBound{r: newBufReader(r)})
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return fleet.File{}, fmt.Errorf("node list: read the header: %w", err)
	}
	mi, gi := slices.Index(head, model), slices.Index(head, gpus)
	if mi < 0 || gi < 0 {
		return fleet.File{}, fmt.Errorf("node list: the header lacks %q or %q", model, gpus)
	}
	total := map[string]int{}
	var order []string
	err = eachRow(cr, "node list", MaxEvents, func(_ int, rec []string) error {
		if mi >= len(rec) || gi >= len(rec) {
			return errors.New("too few fields")
		}
		n, err := count(strings.TrimSpace(rec[gi]), gpus)
		if err != nil || n == 0 {
			return err
		}
		m := gpuName(strings.TrimSpace(rec[mi]))
		if _, ok := total[m]; !ok {
			order = append(order, m)
		}
		total[m] += n
		return nil
	})
	if err != nil {
		return fleet.File{}, err
	}
	var f fleet.File
	for _, m := range order {
		f.Pools = append(f.Pools, fleet.Pool{Region: AlibabaRegion, GPUType: m, Machines: min((total[m]+7)/8, 100_000), GPUsPerMachine: domain.GPUStep})
	}
	if len(f.Pools) == 0 {
		return fleet.File{}, errors.New("node list: no node with GPUs")
	}
	return f, nil
}
