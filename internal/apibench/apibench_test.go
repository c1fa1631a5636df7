// Package apibench measures sparecap's API side by side with
// kube-apiserver's, in one run on one machine with one load generator
// (make bench-api): the real sparecap binary (SQLite, simulated fleet)
// and the test environment's etcd and kube-apiserver (watch cache on, as
// Kubernetes normally runs), each read and written by the same Go HTTP
// clients for the same time.
package apibench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/scalebench"
)

var (
	flagDuration = flag.Duration("duration", 10*time.Second, "how long each endpoint is driven")
	flagClients  = flag.Int("clients", 8, "concurrent clients")
	flagObjects  = flag.Int("objects", 50, "clusters (sparecap) and Nodes (Kubernetes) listed")
	flagOut      = flag.String("out", "", "write the figures as JSON to this file")
	flagBaseline = flag.String("baseline", "", "a sparecap binary (an earlier release) to drive in the same run, beside the one built from this tree")
)

// result is one endpoint driven for a while.
type result struct {
	System   string  `json:"system"`
	Endpoint string  `json:"endpoint"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Rate     float64 `json:"per_second"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
}

// drive sends requests made by next from clients goroutines for d, and
// reports their rate and latency. A request that does not answer want
// counts as an error.
func drive(ctx context.Context, hc *http.Client, clients int, d time.Duration, want int, next func(rnd *rand.Rand) *http.Request) (result, error) {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var firstErr error
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), 7))
			var mine []time.Duration
			bad := 0
			for time.Now().Before(end) && ctx.Err() == nil {
				req := next(rnd).WithContext(ctx)
				start := time.Now()
				resp, err := hc.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != want {
						err = fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
					}
				}
				if err != nil {
					bad++
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no request succeeded: %v", firstErr)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return result{Requests: len(lat), Errors: errs, Rate: float64(len(lat)) / d.Seconds(),
		P50ms: ms(scalebench.Percentile(lat, 50)), P99ms: ms(scalebench.Percentile(lat, 99))}, firstErr
}

func request(method, url, token, contentType, body string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return req
}

const benchFleet = `pools:
  - {region: bench-1, gpu_type: H100_SXM, machines: 200}
prices: {H100_SXM: "2.99"}
`

// startSparecap runs the binary bin (built from this tree when "") with
// n clusters of one project, each with one standard and one preemptible
// node, ready; it returns the server, the project's token and the
// clusters' IDs.
func startSparecap(ctx context.Context, b *testing.B, n int, bin string) (*scalebench.Server, string, []string) {
	dir := b.TempDir()
	if bin == "" {
		wd, err := os.Getwd()
		if err != nil {
			b.Fatal(err)
		}
		root, err := scalebench.ModuleRoot(wd)
		if err != nil {
			b.Fatal(err)
		}
		if bin, err = scalebench.BuildBinary(ctx, root, dir); err != nil {
			b.Fatal(err)
		}
	}
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte(benchFleet), 0o600); err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		b.Fatal(err)
	}
	// The clients all come from one address: per-address and per-token
	// limits would measure the limiter, not the server.
	srv, err := scalebench.StartServer(ctx, bin, data, []string{"--fleet", fleet, "--speed", "60",
		"--rate-limit-address", "0", "--rate-limit-token", "0"}, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Stop(10 * time.Second) })
	admin := client.New(srv.URL, scalebench.AdminToken)
	p, err := admin.CreateProject(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	c := client.New(srv.URL, p.Token)
	ids := make([]string, n)
	for i := range ids {
		cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: fmt.Sprintf("c-%02d", i), Region: "bench-1",
			GPUType: "H100_SXM", NumGPUs: 8, NumPreemptibleGPUs: 8})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = cl.ClusterID
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list, err := c.ListClusters(ctx, client.ListClustersOptions{})
		ready := 0
		for _, cl := range list.Clusters {
			if cl.Status == "Ready" && cl.AllocatedPreemptibleGPUs == 8 {
				ready++
			}
		}
		if err == nil && ready == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d clusters ready after 2 minutes (%v)", ready, n, err)
		}
	}
	return srv, p.Token, ids
}

// startKube runs etcd and kube-apiserver with n Nodes.
func startKube(ctx context.Context, b *testing.B, n int) (*kubeenv.Env, *http.Client, string, []string) {
	env := kubeenv.StartT(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%02d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"sparecap.dev/compute-class": "preemptible"}}}
		if _, err := env.Client().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cfg := env.RESTConfig()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return env, &http.Client{Transport: rt}, cfg.Host, names
}

// benchCase is one endpoint of one system, driven for a while.
type benchCase struct {
	system, endpoint string
	hc               *http.Client
	want             int
	next             func(rnd *rand.Rand) *http.Request
}

// endpointKind orders the cases: reads of one, lists, writes.
func endpointKind(endpoint string) string { return strings.Fields(endpoint)[0] }

// sparecapCases are the endpoints of a sparecap server at url, labelled
// system: its own clients, as kube-apiserver has its.
func sparecapCases(system, url, token string, ids []string) []benchCase {
	n := len(ids)
	sc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *flagClients, MaxConnsPerHost: *flagClients}}
	var toggle atomic.Int64
	return []benchCase{
		{system, "GET one (cluster)", sc, 200, func(rnd *rand.Rand) *http.Request {
			return request("GET", url+"/v1/clusters/"+ids[rnd.IntN(n)], token, "", "")
		}},
		{system, fmt.Sprintf("LIST %d (clusters)", n), sc, 200, func(*rand.Rand) *http.Request {
			return request("GET", url+"/v1/clusters", token, "", "")
		}},
		{system, "PATCH (preemptible target)", sc, 200, func(rnd *rand.Rand) *http.Request {
			gpus := 8 * (1 + toggle.Add(1)%2)
			return request("PATCH", url+"/v1/clusters/"+ids[rnd.IntN(n)], token, "application/json", fmt.Sprintf(`{"num_preemptible_gpus":%d}`, gpus))
		}},
	}
}

// BenchmarkAPIvsKube drives comparable endpoints of sparecap and
// kube-apiserver with the same clients: one object by name, a list of
// 50, and a small write (a cluster's preemptible target; a Node's label).
func BenchmarkAPIvsKube(b *testing.B) {
	ctx := b.Context()
	n := *flagObjects
	var cases []benchCase
	if *flagBaseline != "" {
		srv, token, ids := startSparecap(ctx, b, n, *flagBaseline)
		cases = append(cases, sparecapCases("sparecap (baseline)", srv.URL, token, ids)...)
	}
	srv, token, ids := startSparecap(ctx, b, n, "")
	_, kc, kubeURL, names := startKube(ctx, b, n)
	cases = append(cases, sparecapCases("sparecap", srv.URL, token, ids)...)
	cases = append(cases, []benchCase{
		{"kube-apiserver", "GET one (Node)", kc, 200, func(rnd *rand.Rand) *http.Request {
			return request("GET", kubeURL+"/api/v1/nodes/"+names[rnd.IntN(n)], "", "", "")
		}},
		{"kube-apiserver", fmt.Sprintf("LIST %d (Nodes)", n), kc, 200, func(*rand.Rand) *http.Request {
			return request("GET", kubeURL+"/api/v1/nodes", "", "", "")
		}},
		{"kube-apiserver", "PATCH (Node label)", kc, 200, func(rnd *rand.Rand) *http.Request {
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"bench": fmt.Sprint(rnd.IntN(1000))}}})
			return request("PATCH", kubeURL+"/api/v1/nodes/"+names[rnd.IntN(n)], "", "application/merge-patch+json", string(body))
		}},
	}...)
	// Each endpoint of every system in turn, so a noisy moment of the
	// machine does not land on one system only.
	slices.SortStableFunc(cases, func(a, b benchCase) int { return strings.Compare(endpointKind(a.endpoint), endpointKind(b.endpoint)) })
	var results []result
	for range b.N {
		results = results[:0]
		for _, c := range cases {
			r, err := drive(ctx, c.hc, *flagClients, *flagDuration, c.want, c.next)
			if err != nil && r.Requests == 0 {
				b.Fatalf("%s %s: %v", c.system, c.endpoint, err)
			}
			if err != nil {
				b.Logf("%s %s: %d errors, the first: %v", c.system, c.endpoint, r.Errors, err)
			}
			r.System, r.Endpoint = c.system, c.endpoint
			results = append(results, r)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SYSTEM\tENDPOINT\tREQUESTS/S\tP50 MS\tP99 MS\tERRORS\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%d\n", r.System, r.Endpoint, r.Rate, r.P50ms, r.P99ms, r.Errors)
		key := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(strings.ToLower(r.System + "-" + r.Endpoint))
		b.ReportMetric(r.Rate, key+"-per-s")
		b.ReportMetric(r.P99ms, key+"-p99-ms")
	}
	tw.Flush()
	if *flagOut != "" {
		data, _ := json.MarshalIndent(map[string]any{"clients": *flagClients, "duration_s": flagDuration.Seconds(), "results": results}, "", "  ")
		if err := os.WriteFile(*flagOut, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
