package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/termsafe"
)

const (
	outTable = "table"
	outJSON  = "json"
	outYAML  = "yaml"
)

func checkOutput(o string) error {
	switch o {
	case outTable, outJSON, outYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q for -o/--output: use table, json or yaml", o)
}

// print writes v as JSON or YAML, or calls table for the table format.
func (s *state) print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	switch s.output {
	case outJSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	case outTable:
		tw := newTable(w)
		table(tw)
		return tw.Flush()
	}
	return checkOutput(s.output)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
}

// row writes one tab-separated table row. Each cell is escaped
// (termsafe): names and messages come from other people, and a tab or a
// newline in one would also break the table.
func row(w io.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = termsafe.Escape(fmt.Sprint(c))
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// localTime formats t in the local zone, short.
func (s *state) localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(s.loc).Format("2006-01-02 15:04:05")
}

// timeAndAge is localTime plus how long ago t was.
func (s *state) timeAndAge(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return s.localTime(t) + " (" + s.age(t) + " ago)"
}

// age is how long ago t was, short like kubectl's AGE column.
func (s *state) age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return shortDuration(s.now().Sub(t))
}

func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// deadline shows a drain deadline as RFC 3339 and, while it is ahead, how
// far ahead.
func (s *state) deadline(d *time.Time) string { return s.deadlineFrom(d, s.now()) }

// deadlineFrom is deadline counted down from now.
func (s *state) deadlineFrom(d *time.Time, now time.Time) string {
	if d == nil || d.IsZero() {
		return "-"
	}
	out := d.UTC().Format(time.RFC3339)
	if left := d.Sub(now); left > 0 {
		out += " (in " + left.Round(time.Second).String() + ")"
	} else {
		out += " (passed)"
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
