package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// lendingCollector reports, at scrape time from one snapshot and the
// price book, what the fleet lends and at what price, under the names
// OpenCost and Karpenter give the same things (node_gpu_hourly_cost,
// node_total_hourly_cost and kubecost_node_is_spot; Karpenter's
// cloudprovider_instance_type_offering_price_estimate), so their
// dashboards' queries carry over with the sparecap_ prefix.
type lendingCollector struct {
	st                             store.Store
	clock                          clock.Clock
	lent, gpuCost, totalCost, spot *prometheus.Desc
	offering                       *prometheus.Desc
}

func newLendingCollector(st store.Store, clk clock.Clock) *lendingCollector {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	node := []string{"node", "cluster_id", "class", "region", "gpu_type"}
	return &lendingCollector{st: st, clock: clk,
		lent: prometheus.NewDesc(name("lent_gpus"),
			"GPUs of ready preemptible nodes, by pool and what they are lent out of: idle (machines no reservation holds) or reserved (a reservation's machines its holder does not use).",
			[]string{"region", "gpu_type", "source"}, nil),
		gpuCost: prometheus.NewDesc(name("node_gpu_hourly_cost"),
			"What a ready node is billed per GPU-hour now, in dollars (OpenCost's node_gpu_hourly_cost).", node, nil),
		totalCost: prometheus.NewDesc(name("node_total_hourly_cost"),
			"What a ready node is billed per hour now, all its GPUs, in dollars (OpenCost's node_total_hourly_cost); summed, the fleet's revenue rate.", node, nil),
		spot: prometheus.NewDesc(name("node_is_spot"),
			"1 for a ready preemptible node, 0 for a standard one (OpenCost's kubecost_node_is_spot).", []string{"node", "cluster_id", "region", "gpu_type"}, nil),
		offering: prometheus.NewDesc(name("instance_type_offering_price_estimate"),
			"Price per GPU-hour of a pool's GPUs now, in dollars, by capacity type: on-demand or spot (preemptible) (Karpenter's cloudprovider_instance_type_offering_price_estimate).",
			[]string{"gpu_type", "capacity_type", "region"}, nil),
	}
}

func (c *lendingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lent, c.gpuCost, c.totalCost, c.spot, c.offering} {
		ch <- d
	}
}

func (c *lendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), SnapshotTimeout)
	defer cancel()
	s, err := c.st.Snapshot(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.lent, err)
		return
	}
	prices, err := c.st.ListPrices(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.gpuCost, err)
		return
	}
	book, err := billing.NewBook(prices)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.gpuCost, err)
		return
	}
	now := c.clock.Now().UTC().Truncate(time.Second)
	clusters := make(map[string]*domain.Cluster, len(s.Clusters))
	for i := range s.Clusters {
		clusters[s.Clusters[i].ID] = &s.Clusters[i]
	}
	machines := make(map[string]*domain.Machine, len(s.Machines))
	type pool struct{ region, gpu string }
	pools := map[pool]bool{}
	for i := range s.Machines {
		m := &s.Machines[i]
		machines[m.ID] = m
		pools[pool{m.Region, m.GPUType}] = true
	}
	type lentKey struct{ region, gpu, source string }
	lent := map[lentKey]int{}
	for p := range pools {
		lent[lentKey{p.region, p.gpu, "idle"}], lent[lentKey{p.region, p.gpu, "reserved"}] = 0, 0
	}
	for _, n := range s.Nodes {
		cl, m := clusters[n.ClusterID], machines[n.MachineID]
		if n.State != domain.NodeReady || cl == nil || m == nil {
			continue
		}
		if n.Class == domain.Preemptible {
			src := "idle"
			if m.ReservationID != "" {
				src = "reserved"
			}
			lent[lentKey{cl.Region, cl.GPUType, src}] += n.GPUs
		}
		if rate, ok := hourly(book, n, cl, m, now); ok {
			ch <- prometheus.MustNewConstMetric(c.gpuCost, prometheus.GaugeValue, rate, n.Name, cl.ID, string(n.Class), cl.Region, cl.GPUType)
			ch <- prometheus.MustNewConstMetric(c.totalCost, prometheus.GaugeValue, rate*float64(n.GPUs), n.Name, cl.ID, string(n.Class), cl.Region, cl.GPUType)
		}
		spot := 0.0
		if n.Class == domain.Preemptible {
			spot = 1
		}
		ch <- prometheus.MustNewConstMetric(c.spot, prometheus.GaugeValue, spot, n.Name, cl.ID, cl.Region, cl.GPUType)
	}
	for k, v := range lent {
		ch <- prometheus.MustNewConstMetric(c.lent, prometheus.GaugeValue, float64(v), k.region, k.gpu, k.source)
	}
	for p := range pools {
		od, ok := book.OnDemandRate(p.region, p.gpu, now.Unix())
		if !ok {
			continue
		}
		spot := od * (billing.FullBP - book.DiscountBP(now.Unix())) / billing.FullBP
		ch <- prometheus.MustNewConstMetric(c.offering, prometheus.GaugeValue, float64(od)/billing.MicrosPerDollar, p.gpu, "on-demand", p.region)
		ch <- prometheus.MustNewConstMetric(c.offering, prometheus.GaugeValue, float64(spot)/billing.MicrosPerDollar, p.gpu, "spot", p.region)
	}
}

// hourly is what node n is billed per GPU-hour at now, in dollars, as its
// usage record would be priced.
func hourly(book *billing.Book, n *domain.Node, cl *domain.Cluster, m *domain.Machine, now time.Time) (rate float64, ok bool) {
	r, billable := billing.Record(n, cl, m, now)
	if !billable {
		return 0, false
	}
	r.Start, r.End = now, now.Add(time.Second)
	book.Price([]domain.UsageRecord{r}, now, now.Add(time.Second), func(l billing.Line) {
		if l.Priced {
			rate, ok = float64(l.RateMicros)*float64(l.FactorBP)/billing.FullBP/billing.MicrosPerDollar, true
		}
	})
	return rate, ok
}
