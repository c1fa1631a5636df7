package recipetest

import (
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/testworld"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// serverDiscount is `sparecap server --preemptible-discount`'s default,
// which a server registers in its price book at its start.
const serverDiscount = "50"

// hoursPerMonth is Kubecost's month for its defaultModelPricing.
const hoursPerMonth = 730

// costConfig is what a cost tool's snippet says about spot nodes.
type costConfig struct {
	tool                 string
	spotLabel, spotValue string
	gpu, spotGPU         string
	// hoursPerPrice: the prices are per GPU-hour (1) or per GPU-month.
	hoursPerPrice int64
}

// costSnippet reads a cost tool's Helm values from docs/queues.md: the
// map at prices holds GPU and spotGPU, the map at labels spotLabel and
// spotLabelValue, and each of enabled must be true.
func costSnippet(t *testing.T, name string, hours int64, prices, labels []string, enabled [][]string) (costConfig, string) {
	t.Helper()
	text, err := docs.Snippet("queues.md", name)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("docs/queues.md's %s: %v", name, err)
	}
	str := func(path []string, key string) string {
		t.Helper()
		m, ok := v, true
		for _, p := range path {
			if m, ok = m[p].(map[string]any); !ok {
				t.Fatalf("docs/queues.md's %s has no %s", name, strings.Join(path, "."))
			}
		}
		s, ok := m[key].(string)
		if !ok {
			// Helm renders numbers as they are; the tools read strings.
			t.Fatalf("docs/queues.md's %s: %s.%s is %v, want a string", name, strings.Join(path, "."), key, m[key])
		}
		return s
	}
	for _, path := range enabled {
		if s := fmt.Sprint(getPath(v, path)); s != "true" {
			t.Fatalf("docs/queues.md's %s: %s is %s, want true", name, strings.Join(path, "."), s)
		}
	}
	return costConfig{tool: name, hoursPerPrice: hours,
		spotLabel: str(labels, "spotLabel"), spotValue: str(labels, "spotLabelValue"),
		gpu: str(prices, "GPU"), spotGPU: str(prices, "spotGPU")}, text
}

func getPath(v map[string]any, path []string) any {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// isSpot is how OpenCost's on-prem provider tells a spot node
// (pkg/cloud/provider/customprovider.go, customProviderKey.Features): the
// node's value of spotLabel is not empty and equals spotLabelValue.
func isSpot(labels map[string]string, spotLabel, spotValue string) bool {
	return labels[spotLabel] != "" && labels[spotLabel] == spotValue
}

// TestCostToolsSeeSparecapNodes checks docs/queues.md's OpenCost and
// Kubecost settings against sparecap, without running either tool: the
// spot label and value they name are on every preemptible node sparecap's
// driver adopts in the mini cluster and on none of its standard nodes,
// and their GPU and spot GPU prices are the built-in fleet's on-demand
// price of the GPU type they name and what sparecap's price book charges
// for a preemptible GPU-hour of it (Kubecost's per month of 730 hours).
func TestCostToolsSeeSparecapNodes(t *testing.T) {
	opencost, text := costSnippet(t, "opencost-values", 1,
		[]string{"opencost", "customPricing", "costModel"}, []string{"opencost", "customPricing", "costModel"},
		[][]string{{"opencost", "customPricing", "enabled"}})
	kubecost, _ := costSnippet(t, "kubecost-values", hoursPerMonth,
		[]string{"kubecostProductConfigs", "defaultModelPricing"}, []string{"kubecostProductConfigs"},
		[][]string{{"kubecostProductConfigs", "customPricesEnabled"}, {"kubecostProductConfigs", "defaultModelPricing", "enabled"}})

	// The nodes: sparecap adopts one standard and one preemptible node.
	w := newWorld(t, 2)
	w.Start()
	w.Create("tenant", "p", 8, 8, 0)
	pre := w.WaitReady("tenant", 1, 60*time.Second)
	var std []domain.Node
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if std = w.Nodes("tenant", domain.Standard, domain.NodeReady); len(std) != 1 {
			return fmt.Errorf("%d ready standard nodes, want 1", len(std))
		}
		return nil
	})
	for _, cfg := range []costConfig{opencost, kubecost} {
		for _, n := range append(pre, std...) {
			node, err := env.Client().CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := isSpot(node.Labels, cfg.spotLabel, cfg.spotValue), n.Class == domain.Preemptible; got != want {
				t.Errorf("%s: %s node %s has %s=%q: spot %v with spotLabel %s and spotLabelValue %s, want %v",
					cfg.tool, n.Class, n.Name, cfg.spotLabel, node.Labels[cfg.spotLabel], got, cfg.spotLabel, cfg.spotValue, want)
			}
		}
	}

	// The prices: the GPU type the snippet names, priced by the book a
	// server registers at its start with the built-in fleet.
	def := fleet.Default()
	var gpu string
	for g := range def.Prices {
		if strings.Contains(text, g) {
			if gpu != "" {
				t.Fatalf("docs/queues.md's opencost-values names the GPU types %s and %s, want one", gpu, g)
			}
			gpu = g
		}
	}
	if gpu == "" {
		t.Fatalf("docs/queues.md's opencost-values names none of the built-in fleet's GPU types %v", def.Prices)
	}
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "prices.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now().Truncate(time.Second)
	if err := fleet.RegisterPrices(ctx, st, def, serverDiscount, start); err != nil {
		t.Fatal(err)
	}
	prices, err := st.ListPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	book, err := billing.NewBook(prices)
	if err != nil {
		t.Fatal(err)
	}
	// What one GPU-hour costs, standard (on-demand) and preemptible.
	hour := func(class domain.ComputeClass) *big.Rat {
		from := start.Add(time.Minute)
		rec := domain.UsageRecord{NodeID: "n", ClusterID: "c", Region: testworld.Region, GPUType: gpu, Class: class,
			BillingType: domain.BillingOnDemand, GPUs: 1, Start: from, End: from.Add(time.Hour), Final: true}
		var lines []billing.Line
		book.Price([]domain.UsageRecord{rec}, from, from.Add(time.Hour), func(l billing.Line) { lines = append(lines, l) })
		if len(lines) != 1 || !lines[0].Priced {
			t.Fatalf("the book prices a %s GPU-hour of %s as %+v, want one priced line", class, gpu, lines)
		}
		return lines[0].Amount.Rat()
	}
	onDemand, preemptible := hour(domain.Standard), hour(domain.Preemptible)
	for _, cfg := range []costConfig{opencost, kubecost} {
		for _, p := range []struct {
			key, value string
			want       *big.Rat
		}{{"GPU", cfg.gpu, onDemand}, {"spotGPU", cfg.spotGPU, preemptible}} {
			got, ok := new(big.Rat).SetString(p.value)
			want := new(big.Rat).Mul(p.want, big.NewRat(cfg.hoursPerPrice, 1))
			if !ok || got.Cmp(want) != 0 {
				t.Errorf("%s: %s is %q, want %s (%s of %s per GPU-hour × %d h)", cfg.tool, p.key, p.value, want.FloatString(6), p.key, gpu, cfg.hoursPerPrice)
			}
		}
	}
	t.Logf("%s: on-demand %s, preemptible %s per GPU-hour; spot label %s=%s", gpu, onDemand.FloatString(3), preemptible.FloatString(3), opencost.spotLabel, opencost.spotValue)
}
