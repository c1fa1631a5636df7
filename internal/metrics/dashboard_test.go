package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

const dashboardPath = "../../deploy/grafana/sparecap-dashboard.json"

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// registeredNames are the metric names New registers under the sparecap_
// prefix, from the collectors' descriptions (vectors with no series yet
// included), each mapped to whether it is a histogram.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := New(st, clock.Real{})
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, c := range m.own {
		var hist bool
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec:
			hist = true
		}
		ch := make(chan *prometheus.Desc, 100)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			sm := fq.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			if !strings.HasPrefix(sm[1], Namespace+"_") {
				t.Errorf("metric %s lacks the %s_ prefix", sm[1], Namespace)
			}
			names[sm[1]] = hist
		}
	}
	if len(names) < 11 {
		t.Fatalf("only %d metrics registered: %v", len(names), names)
	}
	return names
}

// TestDashboard keeps the Grafana dashboard in step with the metrics: it
// parses, every query names only registered metrics, and every registered
// metric is charted.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("dashboard uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && strings.Contains(string(v.Query), "prometheus") {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no Prometheus datasource variable named datasource")
	}

	names := registeredNames(t)
	metricRE := regexp.MustCompile(Namespace + `_[a-zA-Z0-9_]+`)
	resolve := func(ref string) (string, bool) {
		if _, ok := names[ref]; ok {
			return ref, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(ref, suffix); ok && names[base] {
				return base, true // a histogram's series
			}
		}
		return "", false
	}
	charted := map[string]bool{}
	check := func(where, expr string) {
		refs := metricRE.FindAllString(expr, -1)
		if len(refs) == 0 {
			t.Errorf("%s: query names no sparecap metric: %s", where, expr)
		}
		for _, ref := range refs {
			base, ok := resolve(ref)
			if !ok {
				t.Errorf("%s: %s is not a metric metrics.New registers (query %s)", where, ref, expr)
				continue
			}
			charted[base] = true
		}
	}

	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d missing or shared with %q", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no queries", p.Title)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not use the datasource variable", p.Title)
			}
			for _, tg := range p.Targets {
				check("panel "+p.Title, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			check("variable "+v.Name, v.Definition)
		}
	}

	var missing []string
	for n := range names {
		if !charted[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics no panel charts: %v", missing)
	}
}
