package scalebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The harness speaks the documented wire format (docs/api.md) with its own
// few types, so that it depends on no package of the server and measures
// any version of the binary the same way.

type createClusterRequest struct {
	ClusterName        string `json:"cluster_name"`
	Region             string `json:"region"`
	GPUType            string `json:"gpu_type"`
	ClusterType        string `json:"cluster_type"`
	BillingType        string `json:"billing_type"`
	NumGPUs            int    `json:"num_gpus"`
	NumPreemptibleGPUs int    `json:"num_preemptible_gpus"`
	ProjectID          string `json:"project_id,omitempty"`
}

type apiCluster struct {
	ClusterID                string    `json:"cluster_id"`
	ProjectID                string    `json:"project_id"`
	Status                   string    `json:"status"`
	NumGPUs                  int       `json:"num_gpus"`
	DesiredPreemptibleGPUs   int       `json:"desired_preemptible_gpus"`
	AllocatedPreemptibleGPUs int       `json:"allocated_preemptible_gpus"`
	GPUWorkerNodes           []apiNode `json:"gpu_worker_nodes"`
}

type apiNode struct {
	NodeName     string `json:"node_name"`
	ComputeClass string `json:"compute_class"`
	Status       string `json:"status"`
}

type apiClusterList struct {
	Clusters []apiCluster `json:"clusters"`
}

type apiProject struct {
	ProjectID string `json:"project_id"`
	Token     string `json:"token"`
}

type apiMachine struct {
	MachineID string `json:"machine_id"`
	Region    string `json:"region"`
	GPUType   string `json:"gpu_type"`
	Pool      string `json:"pool"` // "on-demand" or "reservation:<id>"
	State     string `json:"state"`
	ClusterID string `json:"cluster_id"`
	NodeName  string `json:"node_name"`
	// OutOfServiceReason is set when sparecap took the machine out of
	// service itself.
	OutOfServiceReason string `json:"out_of_service_reason"`
}

type apiMachineList struct {
	Machines []apiMachine `json:"machines"`
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// statusError is a non-2xx answer.
type statusError struct {
	Status int
	Code   string
	Msg    string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// client is one API client: its own http.Client and connection pool, as a
// separate tenant process would have.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, timeout time.Duration) *client {
	tr := &http.Transport{
		MaxIdleConns:        4,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &client{base: base, hc: &http.Client{Timeout: timeout, Transport: tr}}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// do sends one request and decodes a 2xx JSON answer into out (if not
// nil). A non-2xx answer is a *statusError.
func (c *client) do(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e apiError
		_ = json.Unmarshal(data, &e)
		se := &statusError{Status: resp.StatusCode, Code: e.Error.Code, Msg: e.Error.Message}
		if se.Msg == "" {
			se.Msg = string(bytes.TrimSpace(data))
		}
		return se
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// metrics scrapes /metrics in the text format.
func (c *client) metrics(ctx context.Context) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return ParseMetrics(resp.Body)
}
