package scalebench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
)

// Figure is one measured value.
type Figure struct {
	// Key is the metric's unit in `go test -bench` output and its name in
	// the JSON file, e.g. "create-p50-ms". Keys are unique.
	Key   string  `json:"key"`
	Phase string  `json:"phase"`
	Label string  `json:"label"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Report collects the figures of a run, in the order they were measured.
type Report struct {
	mu      sync.Mutex
	Meta    map[string]any `json:"meta"`
	Figures []Figure       `json:"figures"`
	Notes   []string       `json:"notes,omitempty"`
}

// NewReport returns an empty report.
func NewReport() *Report { return &Report{Meta: map[string]any{}} }

// Add records a figure; a key added again replaces the earlier value.
// NaN and infinities are stored as -1 (JSON has no such numbers), with a
// note.
func (r *Report) Add(phase, key, label string, v float64, unit string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.Notes = append(r.Notes, fmt.Sprintf("%s was %v, stored as -1", key, v))
		v = -1
	}
	for i := range r.Figures {
		if r.Figures[i].Key == key {
			r.Figures[i] = Figure{key, phase, label, v, unit}
			return
		}
	}
	r.Figures = append(r.Figures, Figure{key, phase, label, v, unit})
}

// Note adds a line of text to the report.
func (r *Report) Note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Get returns a figure's value.
func (r *Report) Get(key string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.Figures {
		if f.Key == key {
			return f.Value, true
		}
	}
	return 0, false
}

// All returns a copy of the figures.
func (r *Report) All() []Figure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Figure(nil), r.Figures...)
}

// WriteTable prints the figures as a table for people.
func (r *Report) WriteTable(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tFIGURE\tVALUE\tUNIT\tKEY")
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Phase, f.Label, formatValue(f.Value), f.Unit, f.Key)
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func formatValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	r.mu.Lock()
	data, err := json.MarshalIndent(r, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// MetricUnit makes a key usable as a testing.B metric unit (no spaces).
func MetricUnit(key string) string { return strings.ReplaceAll(key, " ", "_") }
