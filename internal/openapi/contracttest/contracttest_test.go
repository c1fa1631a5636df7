package contracttest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func exchange(method, target, body string, status int, media, answer string) Exchange {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	h := http.Header{}
	if media != "" {
		h.Set("Content-Type", media)
	}
	return Exchange{Request: req, Body: []byte(body), Status: status, Header: h, Response: []byte(answer)}
}

const okCluster = `{"cluster_id":"c-1","cluster_name":"a","project_id":"p","region":"r","gpu_type":"g","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","status":"Ready","num_gpus":8,` +
	`"desired_preemptible_gpus":0,"allocated_preemptible_gpus":0,"max_preemptible_gpus":0,"preemptible_gpu_types":["g"],"preemptible_strategy":"in-order","max_preemptible_per_gpu_hour":"",` +
	`"requested_preemptible_gpus":0,"target_preemptible_gpus":0,"weight":1,"gpu_worker_nodes":[],"created_at":"2026-12-07T10:00:00Z","kubernetes":{"attached":false}}`

// TestTheCheckerCatchesBreaches: each exchange breaks the contract in one
// way and must be refused; the same exchange made right is taken.
func TestTheCheckerCatchesBreaches(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(exchange("GET", "/v1/clusters/c-1", "", 200, "application/json", okCluster)); err != nil {
		t.Fatalf("a good answer was refused: %v", err)
	}
	for name, x := range map[string]Exchange{
		"an undocumented status":      exchange("GET", "/v1/clusters/c-1", "", 418, "application/json", `{"error":{"code":"x","message":"y"}}`),
		"a field of the wrong type":   exchange("GET", "/v1/clusters/c-1", "", 200, "application/json", strings.Replace(okCluster, `"num_gpus":8`, `"num_gpus":"8"`, 1)),
		"a required field left out":   exchange("GET", "/v1/clusters/c-1", "", 200, "application/json", strings.Replace(okCluster, `"status":"Ready",`, ``, 1)),
		"an error without its shape":  exchange("GET", "/v1/clusters/c-1", "", 404, "application/json", `{"message":"gone"}`),
		"an undocumented route":       exchange("GET", "/v1/nothing/here", "", 200, "application/json", `{}`),
		"an accepted unknown field":   exchange("POST", "/v1/clusters", `{"cluster_name":"a","region":"r","gpu_type":"g","num_gpus":8,"colour":"red"}`, 201, "application/json", okCluster),
		"an accepted request lacking": exchange("POST", "/v1/clusters", `{"region":"r","gpu_type":"g","num_gpus":8}`, 201, "application/json", okCluster),
		"an accepted closed enum":     exchange("POST", "/v1/clusters", `{"cluster_name":"a","region":"r","gpu_type":"g","num_gpus":8,"cluster_type":"NOMAD"}`, 201, "application/json", okCluster),
		"an undeclared query":         exchange("GET", "/v1/clusters/c-1?verbose=1", "", 200, "application/json", okCluster),
		"CSV columns out of order":    exchange("GET", "/v1/usage?from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&format=csv", "", 200, "text/csv; charset=utf-8", "cluster_id,project_id\n"),
		"an event out of contract":    exchange("GET", "/v1/clusters/c-1/events?watch=true", "", 200, "text/event-stream", "id: 1\nevent: lifecycle\ndata: {\"event_id\":5}\n\n"),
	} {
		if err := c.Check(x); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
	// A refused request may break the contract: that is why it was refused.
	if err := c.Check(exchange("POST", "/v1/clusters", `{"colour":"red"}`, 400, "application/json", `{"error":{"code":"invalid_argument","message":"unknown field"}}`)); err != nil {
		t.Errorf("a refused bad request counted against the contract: %v", err)
	}
	// An open enumeration takes a value it does not list.
	if err := c.Check(exchange("GET", "/v1/clusters/c-1", "", 200, "application/json", strings.Replace(okCluster, `"status":"Ready"`, `"status":"Hibernating"`, 1))); err != nil {
		t.Errorf("a new value of an open enumeration was refused: %v", err)
	}
}
