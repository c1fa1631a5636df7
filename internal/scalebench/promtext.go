package scalebench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape is one parsed /metrics answer.
type Scrape []Sample

// ParseMetrics reads the Prometheus text format (version 0.0.4). It keeps
// what the harness needs: names, labels and values; comments, types and
// timestamps are dropped.
func ParseMetrics(r io.Reader) (Scrape, error) {
	var out Scrape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		s, ok, err := parseSampleLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func parseSampleLine(l string) (Sample, bool, error) {
	l = strings.TrimSpace(l)
	if l == "" || l[0] == '#' {
		return Sample{}, false, nil
	}
	var s Sample
	i := strings.IndexAny(l, "{ \t")
	if i < 0 {
		return Sample{}, false, fmt.Errorf("no value in %q", l)
	}
	s.Name = l[:i]
	rest := l[i:]
	if rest[0] == '{' {
		labels, n, err := parseLabels(rest)
		if err != nil {
			return Sample{}, false, fmt.Errorf("%w in %q", err, l)
		}
		s.Labels = labels
		rest = rest[n:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return Sample{}, false, fmt.Errorf("no value in %q", l)
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return Sample{}, false, fmt.Errorf("value of %q: %w", l, err)
	}
	s.Value = v
	return s, true, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// parseLabels reads `{k="v",...}` at the start of s and returns the labels
// and how many bytes it read.
func parseLabels(s string) (map[string]string, int, error) {
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, 0, fmt.Errorf("unterminated labels")
		}
		if s[i] == '}' {
			return labels, i + 1, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, 0, fmt.Errorf("label without '='")
		}
		key := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("label %s: value not quoted", key)
		}
		i++
		var v strings.Builder
		for {
			if i >= len(s) {
				return nil, 0, fmt.Errorf("label %s: unterminated value", key)
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				i++
				continue
			}
			v.WriteByte(c)
			i++
		}
		labels[key] = v.String()
	}
}

// matches says whether every label of want has that value in s.
func (s Sample) matches(want map[string]string) bool {
	for k, v := range want {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// Sum adds the values of the samples called name whose labels include
// want (nil: all). It also says whether any sample matched.
func (sc Scrape) Sum(name string, want map[string]string) (float64, bool) {
	total, found := 0.0, false
	for _, s := range sc {
		if s.Name == name && s.matches(want) {
			total += s.Value
			found = true
		}
	}
	return total, found
}

// Value is Sum, 0 when nothing matched.
func (sc Scrape) Value(name string, want map[string]string) float64 {
	v, _ := sc.Sum(name, want)
	return v
}

// ByLabel sums name's samples by the value of one label.
func (sc Scrape) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range sc {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}

// Bucket of a histogram: the cumulative count of observations ≤ Le.
type Bucket struct {
	Le    float64
	Count float64
}

// Histogram is one (label-less, or summed) Prometheus histogram.
type Histogram struct {
	Buckets []Bucket // ascending Le, +Inf last
	Count   float64
	Sum     float64
}

// Histogram reads histogram name (its _bucket, _count and _sum series),
// summing over any labels.
func (sc Scrape) Histogram(name string) Histogram {
	byLe := map[float64]float64{}
	var h Histogram
	for _, s := range sc {
		switch s.Name {
		case name + "_bucket":
			le, err := parseValue(s.Labels["le"])
			if err != nil {
				continue
			}
			byLe[le] += s.Value
		case name + "_count":
			h.Count += s.Value
		case name + "_sum":
			h.Sum += s.Value
		}
	}
	for le, c := range byLe {
		h.Buckets = append(h.Buckets, Bucket{le, c})
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].Le < h.Buckets[j].Le })
	return h
}

// Sub is what h gained since before (same buckets).
func (h Histogram) Sub(before Histogram) Histogram {
	prev := map[float64]float64{}
	for _, b := range before.Buckets {
		prev[b.Le] = b.Count
	}
	out := Histogram{Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, Bucket{b.Le, b.Count - prev[b.Le]})
	}
	return out
}

// Quantile is the upper bound of the bucket holding the q-th quantile
// (0 < q ≤ 1): the smallest Le whose cumulative count reaches q·Count.
// +Inf when it is beyond the last finite bucket, 0 with no observations.
// Quantile(1) is the highest bucket any observation reached.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 {
		return 0
	}
	need := q * h.Count
	for _, b := range h.Buckets {
		if b.Count >= need-1e-9 {
			return b.Le
		}
	}
	return math.Inf(1)
}

// Mean of the observations, 0 with none.
func (h Histogram) Mean() float64 {
	if h.Count <= 0 {
		return 0
	}
	return h.Sum / h.Count
}
