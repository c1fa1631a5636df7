package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   map[string]any
}

// fakeServer answers every request with status and body, recording it.
type fakeServer struct {
	t      *testing.T
	mu     sync.Mutex
	reqs   []recorded
	status int
	body   string
}

func newFake(t *testing.T, status int, body string) (*fakeServer, *Client) {
	t.Helper()
	f := &fakeServer{t: t, status: status, body: body}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type")}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.Body); err != nil {
				t.Errorf("request body is not JSON: %q", b)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		io.WriteString(w, f.body)
	}))
	t.Cleanup(srv.Close)
	return f, New(srv.URL+"/", "tok-123")
}

func (f *fakeServer) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		f.t.Fatal("no request recorded")
	}
	return f.reqs[len(f.reqs)-1]
}

func intp(i int) *int              { return &i }
func boolp(b bool) *bool           { return &b }
func timep(t time.Time) *time.Time { return &t }

func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		status    int
		body      string
		call      func(c *Client) (any, error)
		method    string
		path      string
		query     string
		wantBody  map[string]any
		wantValue any
	}{
		{
			name: "create cluster", status: 201,
			body: `{"cluster_id":"c1","cluster_name":"a","desired_preemptible_gpus":8}`,
			call: func(c *Client) (any, error) {
				return c.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "a", Region: "r", GPUType: "H100", ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: 0})
			},
			method: "POST", path: "/v1/clusters",
			wantBody:  map[string]any{"cluster_name": "a", "region": "r", "gpu_type": "H100", "cluster_type": "KUBERNETES", "billing_type": "ON_DEMAND", "num_gpus": 8.0, "num_preemptible_gpus": 0.0},
			wantValue: &apiv1.Cluster{ClusterID: "c1", ClusterName: "a", DesiredPreemptibleGPUs: 8},
		},
		{
			name: "list clusters", status: 200, body: `{"clusters":[{"cluster_id":"c1"}]}`,
			call:   func(c *Client) (any, error) { return c.ListClusters(ctx, ListClustersOptions{ProjectID: "p 1"}) },
			method: "GET", path: "/v1/clusters", query: "project_id=p+1",
			wantValue: &apiv1.ClusterList{Clusters: []apiv1.Cluster{{ClusterID: "c1"}}},
		},
		{
			name: "list clusters unfiltered", status: 200, body: `{"clusters":[]}`,
			call:   func(c *Client) (any, error) { return c.ListClusters(ctx, ListClustersOptions{}) },
			method: "GET", path: "/v1/clusters",
			wantValue: &apiv1.ClusterList{Clusters: []apiv1.Cluster{}},
		},
		{
			name: "get cluster", status: 200, body: `{"cluster_id":"c/1"}`,
			call:   func(c *Client) (any, error) { return c.GetCluster(ctx, "c/1") },
			method: "GET", path: "/v1/clusters/c%2F1",
			wantValue: &apiv1.Cluster{ClusterID: "c/1"},
		},
		{
			name: "update cluster only preemptible", status: 200, body: `{"cluster_id":"c1"}`,
			call: func(c *Client) (any, error) {
				return c.UpdateCluster(ctx, "c1", apiv1.UpdateClusterRequest{NumPreemptibleGPUs: intp(16)})
			},
			method: "PATCH", path: "/v1/clusters/c1",
			wantBody:  map[string]any{"num_preemptible_gpus": 16.0},
			wantValue: &apiv1.Cluster{ClusterID: "c1"},
		},
		{
			name: "update cluster to zero", status: 200, body: `{"cluster_id":"c1"}`,
			call: func(c *Client) (any, error) {
				return c.UpdateCluster(ctx, "c1", apiv1.UpdateClusterRequest{NumPreemptibleGPUs: intp(0), NumGPUs: intp(8)})
			},
			method: "PATCH", path: "/v1/clusters/c1",
			wantBody:  map[string]any{"num_preemptible_gpus": 0.0, "num_gpus": 8.0},
			wantValue: &apiv1.Cluster{ClusterID: "c1"},
		},
		{
			name: "delete cluster", status: 202, body: `{"cluster_id":"c1","status":"Deleting"}`,
			call:   func(c *Client) (any, error) { return c.DeleteCluster(ctx, "c1") },
			method: "DELETE", path: "/v1/clusters/c1",
			wantValue: &apiv1.Cluster{ClusterID: "c1", Status: "Deleting"},
		},
		{
			name: "attach kubeconfig", status: 200, body: `{"cluster_id":"c1","kubernetes":{"attached":true,"attached_at":"2025-03-04T10:00:00Z"}}`,
			call: func(c *Client) (any, error) {
				return c.AttachKubeconfig(ctx, "c/1", []byte("apiVersion: v1\nkind: Config\n"))
			},
			method: "PUT", path: "/v1/admin/clusters/c%2F1/kubeconfig",
			wantBody: map[string]any{"kubeconfig": "apiVersion: v1\nkind: Config\n"},
			wantValue: &apiv1.Cluster{ClusterID: "c1", Kubernetes: apiv1.KubernetesStatus{Attached: true,
				AttachedAt: timep(time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC))}},
		},
		{
			name: "detach kubeconfig", status: 200, body: `{"cluster_id":"c1","kubernetes":{"attached":false}}`,
			call:   func(c *Client) (any, error) { return c.DetachKubeconfig(ctx, "c1") },
			method: "DELETE", path: "/v1/admin/clusters/c1/kubeconfig",
			wantValue: &apiv1.Cluster{ClusterID: "c1"},
		},
		{
			name: "list events", status: 200, body: `{"node_lifecycle_events":[{"event_id":"e1","reason":"NodeAdded"}],"next_cursor":"9"}`,
			call:   func(c *Client) (any, error) { return c.ListEvents(ctx, "c1", "5", 10) },
			method: "GET", path: "/v1/clusters/c1/events", query: "cursor=5&limit=10",
			wantValue: &apiv1.EventList{Events: []apiv1.Event{{EventID: "e1", Reason: "NodeAdded"}}, NextCursor: "9"},
		},
		{
			name: "list events from start", status: 200, body: `{"node_lifecycle_events":[],"next_cursor":""}`,
			call:   func(c *Client) (any, error) { return c.ListEvents(ctx, "c1", "", 0) },
			method: "GET", path: "/v1/clusters/c1/events",
			wantValue: &apiv1.EventList{Events: []apiv1.Event{}},
		},
		{
			name: "capacity", status: 200, body: `{"capacity":[{"region":"r","gpu_type":"H100","total_gpus":64,"available_preemptible_gpus":16}]}`,
			call:   func(c *Client) (any, error) { return c.Capacity(ctx) },
			method: "GET", path: "/v1/capacity",
			wantValue: &apiv1.CapacityList{Capacity: []apiv1.Capacity{{Region: "r", GPUType: "H100", Total: 64, AvailablePreemptible: 16}}},
		},
		{
			name: "create project", status: 201, body: `{"project_id":"p1","token":"secret"}`,
			call:   func(c *Client) (any, error) { return c.CreateProject(ctx, "p1") },
			method: "POST", path: "/v1/admin/projects",
			wantBody:  map[string]any{"project_id": "p1"},
			wantValue: &apiv1.Project{ProjectID: "p1", Token: "secret"},
		},
		{
			name: "list projects", status: 200, body: `{"projects":[{"project_id":"p1"}]}`,
			call:   func(c *Client) (any, error) { return c.ListProjects(ctx) },
			method: "GET", path: "/v1/admin/projects",
			wantValue: &apiv1.ProjectList{Projects: []apiv1.Project{{ProjectID: "p1"}}},
		},
		{
			name: "create machines", status: 201, body: `{"machines":[{"machine_id":"m1","gpus":8}]}`,
			call: func(c *Client) (any, error) {
				return c.CreateMachines(ctx, apiv1.CreateMachinesRequest{Region: "r", GPUType: "H100", Count: 2, GPUsPerMachine: 8, ReservationID: "res1"})
			},
			method: "POST", path: "/v1/admin/machines",
			wantBody:  map[string]any{"region": "r", "gpu_type": "H100", "count": 2.0, "gpus_per_machine": 8.0, "reservation_id": "res1"},
			wantValue: &apiv1.MachineList{Machines: []apiv1.Machine{{MachineID: "m1", GPUs: 8}}},
		},
		{
			name: "list machines filtered", status: 200, body: `{"machines":[]}`,
			call: func(c *Client) (any, error) {
				return c.ListMachines(ctx, ListMachinesOptions{Region: "r", GPUType: "H100", State: "free"})
			},
			method: "GET", path: "/v1/admin/machines", query: "gpu_type=H100&region=r&state=free",
			wantValue: &apiv1.MachineList{Machines: []apiv1.Machine{}},
		},
		{
			name: "update machine", status: 200, body: `{"machine_id":"m1","state":"out_of_service"}`,
			call: func(c *Client) (any, error) {
				return c.UpdateMachine(ctx, "m1", apiv1.UpdateMachineRequest{OutOfService: boolp(false)})
			},
			method: "PATCH", path: "/v1/admin/machines/m1",
			wantBody:  map[string]any{"out_of_service": false},
			wantValue: &apiv1.Machine{MachineID: "m1", State: "out_of_service"},
		},
		{
			name: "create reservation", status: 201, body: `{"reservation_id":"res1","project_id":"p1"}`,
			call: func(c *Client) (any, error) {
				return c.CreateReservation(ctx, apiv1.CreateReservationRequest{ProjectID: "p1", Region: "r", GPUType: "H100"})
			},
			method: "POST", path: "/v1/admin/reservations",
			wantBody:  map[string]any{"project_id": "p1", "region": "r", "gpu_type": "H100"},
			wantValue: &apiv1.Reservation{ReservationID: "res1", ProjectID: "p1"},
		},
		{
			name: "list reservations", status: 200, body: `{"reservations":[{"reservation_id":"res1"}]}`,
			call:   func(c *Client) (any, error) { return c.ListReservations(ctx) },
			method: "GET", path: "/v1/admin/reservations",
			wantValue: &apiv1.ReservationList{Reservations: []apiv1.Reservation{{ReservationID: "res1"}}},
		},
		{
			name: "healthz", status: 200, body: `ok`,
			call:   func(c *Client) (any, error) { return nil, c.Healthz(ctx) },
			method: "GET", path: "/healthz",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, tc.status, tc.body)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := f.last()
			if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query {
				t.Errorf("request = %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tc.method, tc.path, tc.query)
			}
			if r.Auth != "Bearer tok-123" {
				t.Errorf("Authorization = %q", r.Auth)
			}
			if !reflect.DeepEqual(r.Body, tc.wantBody) {
				t.Errorf("body = %v, want %v", r.Body, tc.wantBody)
			}
			if tc.wantBody != nil && r.ContentType != "application/json" {
				t.Errorf("Content-Type = %q", r.ContentType)
			}
			if tc.wantValue != nil && !reflect.DeepEqual(got, tc.wantValue) {
				t.Errorf("result = %#v, want %#v", got, tc.wantValue)
			}
		})
	}
}

func TestNoTokenNoAuthHeader(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Values("Authorization")
	}))
	defer srv.Close()
	if err := New(srv.URL, "").Healthz(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(auth) != 0 {
		t.Errorf("Authorization sent without a token: %q", auth)
	}
}

func TestBaseURLPathPrefix(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	if _, err := New(srv.URL+"/sparecap/", "t").GetCluster(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if path != "/sparecap/v1/clusters/c1" {
		t.Errorf("path = %q", path)
	}
}

func TestAPIErrors(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   APIError
		text   string
	}{
		{"capacity", 409, `{"error":{"code":"insufficient_capacity","message":"only 8 GPUs free"}}`,
			APIError{Status: 409, Code: "insufficient_capacity", Message: "only 8 GPUs free"},
			"409 insufficient_capacity: only 8 GPUs free"},
		{"field", 400, `{"error":{"code":"invalid_argument","message":"must be a multiple of 8","field":"num_gpus"}}`,
			APIError{Status: 400, Code: "invalid_argument", Message: "must be a multiple of 8", Field: "num_gpus"},
			"400 invalid_argument: must be a multiple of 8 (field num_gpus)"},
		{"not found", 404, `{"error":{"code":"not_found","message":"cluster c1 not found"}}`,
			APIError{Status: 404, Code: "not_found", Message: "cluster c1 not found"},
			"404 not_found: cluster c1 not found"},
		{"html from a proxy", 502, `<html>Bad Gateway</html>`,
			APIError{Status: 502, Code: "http_502", Message: "<html>Bad Gateway</html>"},
			"502 http_502: <html>Bad Gateway</html>"},
		{"empty 401", 401, ``,
			APIError{Status: 401, Code: "unauthenticated", Message: "Unauthorized"},
			"401 unauthenticated: Unauthorized"},
		{"500", 500, `{"error":{"code":"internal","message":"boom"}}`,
			APIError{Status: 500, Code: "internal", Message: "boom"},
			"500 internal: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := newFake(t, tc.status, tc.body)
			cl, err := c.GetCluster(context.Background(), "c1")
			if cl != nil {
				t.Errorf("got a cluster with an error: %+v", cl)
			}
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %T %v, want *APIError", err, err)
			}
			if *ae != tc.want {
				t.Errorf("APIError = %+v, want %+v", *ae, tc.want)
			}
			if err.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.text)
			}
		})
	}
	_, c := newFake(t, 404, `{"error":{"code":"not_found","message":"x"}}`)
	_, err := c.GetCluster(context.Background(), "c1")
	if !IsNotFound(err) || IsConflict(err) || IsUnauthorized(err) {
		t.Errorf("status predicates wrong for %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := New(srv.URL, "t").ListClusters(ctx, ListClustersOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
}

func TestBadJSONResponse(t *testing.T) {
	_, c := newFake(t, 200, `{"cluster_id":`)
	_, err := c.GetCluster(context.Background(), "c1")
	if err == nil || !strings.Contains(err.Error(), "decode response") {
		t.Errorf("err = %v", err)
	}
}

func TestServerTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sparecap-Time", "2030-01-02T03:04:05Z")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	if _, ok := c.ServerTime(); ok {
		t.Fatal("server time known before any response")
	}
	if err := c.Healthz(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok := c.ServerTime()
	want := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if !ok || got.Before(want) || got.Sub(want) > time.Second {
		t.Fatalf("server time %v, want about %v", got, want)
	}
}
