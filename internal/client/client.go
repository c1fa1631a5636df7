package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/termsafe"
)

// maxErrorBody bounds how much of an error response is read: enough for any
// apiv1.Error, little enough that a misbehaving proxy cannot exhaust memory.
const maxErrorBody = 1 << 20

// Client calls one sparecap API server. It is safe for concurrent use.
type Client struct {
	baseURL   string
	token     string
	http      *http.Client
	userAgent string
	// wall times what passed since the last response: wall time.
	wall clock.Clock

	mu         sync.Mutex
	serverTime time.Time // from the last response's Sparecap-Time header
	receivedAt time.Time // wall time it arrived
}

// ServerTime is the server's clock as of the last response (its
// Sparecap-Time header) plus the wall time since; ok is false before any
// response carried it. A server run with --speed keeps a simulated clock,
// and ages and countdowns are only right against it.
func (c *Client) ServerTime() (t time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serverTime.IsZero() {
		return time.Time{}, false
	}
	return c.serverTime.Add(c.wall.Now().Sub(c.receivedAt)), true
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send requests with hc instead of
// http.DefaultClient. hc must not set a Timeout if WatchEvents is used: the
// event stream stays open; bound calls with their context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithClock makes ServerTime add the time since the last response on clk
// (a wall clock) instead of clock.Real.
func WithClock(clk clock.Clock) Option {
	return func(c *Client) { c.wall = clk }
}

// New returns a client of the API at baseURL (for example
// "http://127.0.0.1:8407"; a path prefix is kept) that authenticates with
// token. An empty token sends no Authorization header.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		baseURL:   strings.TrimRight(baseURL, "/"),
		token:     token,
		http:      http.DefaultClient,
		userAgent: "sparecap-go-client",
		wall:      clock.Real{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server address the client talks to.
func (c *Client) BaseURL() string { return c.baseURL }

// APIError is a non-2xx answer of the API.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the stable error code (apiv1.CodeNotFound, …). When the body
	// was not an apiv1.Error it is derived from the status.
	Code    string
	Message string
	// Field names the request field at fault, if any.
	Field string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" && !strings.Contains(e.Message, e.Field) {
		msg += " (field " + e.Field + ")"
	}
	// The message can quote what someone typed; it ends up on a terminal.
	return termsafe.Escape(msg)
}

// IsNotFound reports whether err is an APIError with status 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is an APIError with status 409 (conflict or
// insufficient capacity).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsUnauthorized reports whether err is an APIError with status 401 or 403.
func IsUnauthorized(err error) bool {
	return hasStatus(err, http.StatusUnauthorized) || hasStatus(err, http.StatusForbidden)
}

func hasStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// do sends one request. in (if not nil) is sent as JSON; a 2xx body is
// decoded into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.send(ctx, method, path, query, in, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// send performs the request and returns the response if its status is 2xx;
// otherwise it closes the body and returns an *APIError.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any, accept string) (*http.Response, error) {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A *url.Error already names the method and URL.
		return nil, err
	}
	if t, err := time.Parse(time.RFC3339Nano, resp.Header.Get("Sparecap-Time")); err == nil {
		c.mu.Lock()
		c.serverTime, c.receivedAt = t, c.wall.Now()
		c.mu.Unlock()
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// decodeError turns an error response into an *APIError, also when the body
// is not an apiv1.Error (a proxy's HTML page, an empty body).
func decodeError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ae := &APIError{Status: resp.StatusCode}
	var e apiv1.Error
	if json.Unmarshal(b, &e) == nil && (e.Error.Code != "" || e.Error.Message != "") {
		ae.Code, ae.Message, ae.Field = e.Error.Code, e.Error.Message, e.Error.Field
	}
	if ae.Code == "" {
		ae.Code = codeForStatus(resp.StatusCode)
	}
	if ae.Message == "" {
		ae.Message = strings.TrimSpace(string(b))
		if len(ae.Message) > 200 {
			ae.Message = ae.Message[:200] + "…"
		}
		if ae.Message == "" {
			ae.Message = http.StatusText(resp.StatusCode)
		}
	}
	return ae
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return apiv1.CodeInvalid
	case http.StatusUnauthorized:
		return apiv1.CodeUnauthorized
	case http.StatusForbidden:
		return apiv1.CodeForbidden
	case http.StatusNotFound:
		return apiv1.CodeNotFound
	case http.StatusConflict:
		return apiv1.CodeConflict
	case http.StatusInternalServerError:
		return apiv1.CodeInternal
	}
	return "http_" + strconv.Itoa(status)
}

// call is do for endpoints that answer with a body of type T. It returns
// nil and the error on failure, never a half-filled T.
func call[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any) (*T, error) {
	var out T
	if err := c.do(ctx, method, path, query, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func clusterPath(id string, rest ...string) string {
	p := "/v1/clusters/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// CreateCluster creates a cluster; its standard nodes are provisioned
// before the call returns (201).
func (c *Client) CreateCluster(ctx context.Context, req apiv1.CreateClusterRequest) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPost, "/v1/clusters", nil, req)
}

// ListClustersOptions filters ListClusters.
type ListClustersOptions struct {
	// ProjectID limits the list to one project (admin tokens); empty lists
	// every cluster the token may see.
	ProjectID string
}

// ListClusters lists clusters.
func (c *Client) ListClusters(ctx context.Context, opts ListClustersOptions) (*apiv1.ClusterList, error) {
	q := url.Values{}
	if opts.ProjectID != "" {
		q.Set("project_id", opts.ProjectID)
	}
	return call[apiv1.ClusterList](ctx, c, http.MethodGet, "/v1/clusters", q, nil)
}

// GetCluster returns one cluster with its nodes.
func (c *Client) GetCluster(ctx context.Context, id string) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodGet, clusterPath(id), nil, nil)
}

// UpdateCluster changes the fields set in req; nil fields keep their value.
func (c *Client) UpdateCluster(ctx context.Context, id string, req apiv1.UpdateClusterRequest) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPatch, clusterPath(id), nil, req)
}

// ConvertNode converts a ready node of the cluster (by its ID or name) to
// class ("standard" or "preemptible") in place, and returns the cluster.
func (c *Client) ConvertNode(ctx context.Context, clusterID, node, class string) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPost, clusterPath(clusterID, "nodes", url.PathEscape(node), "convert"), nil,
		apiv1.ConvertNodeRequest{ComputeClass: class})
}

// DeleteCluster starts deleting a cluster and returns it in status
// Deleting. GetCluster returns a 404 APIError once it is gone.
func (c *Client) DeleteCluster(ctx context.Context, id string) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodDelete, clusterPath(id), nil, nil)
}

// AttachKubeconfig attaches a cluster's Kubernetes API (admin): kubeconfig
// is the YAML of a kubeconfig with its credentials embedded. The server
// checks it without contacting the cluster and stores it sealed; it is
// never returned. It replaces any kubeconfig attached before.
func (c *Client) AttachKubeconfig(ctx context.Context, id string, kubeconfig []byte) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPut, kubeconfigPath(id), nil,
		apiv1.AttachKubeconfigRequest{Kubeconfig: string(kubeconfig)})
}

// DetachKubeconfig removes a cluster's kubeconfig (admin); detaching a
// cluster with none attached is not an error.
func (c *Client) DetachKubeconfig(ctx context.Context, id string) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodDelete, kubeconfigPath(id), nil, nil)
}

// AttachSlurm attaches a SLURM cluster's slurm.conf (admin): the server
// checks that its slurmctld answers, and stores it sealed; it is never
// returned. It replaces any slurm.conf attached before.
func (c *Client) AttachSlurm(ctx context.Context, id string, conf []byte) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPut, slurmPath(id), nil, apiv1.AttachSlurmRequest{SlurmConf: string(conf)})
}

// DetachSlurm removes a SLURM cluster's slurm.conf (admin).
func (c *Client) DetachSlurm(ctx context.Context, id string) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodDelete, slurmPath(id), nil, nil)
}

func slurmPath(id string) string {
	return "/v1/admin/clusters/" + url.PathEscape(id) + "/slurm"
}

func kubeconfigPath(id string) string {
	return "/v1/admin/clusters/" + url.PathEscape(id) + "/kubeconfig"
}

// ListEvents returns the node lifecycle events of a cluster after cursor
// (empty: from the oldest kept), at most limit of them (0: the server's
// default). Pass the result's NextCursor to get the following ones.
func (c *Client) ListEvents(ctx context.Context, clusterID, cursor string, limit int) (*apiv1.EventList, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return call[apiv1.EventList](ctx, c, http.MethodGet, clusterPath(clusterID, "events"), q, nil)
}

// Capacity reports capacity per region and GPU type.
func (c *Client) Capacity(ctx context.Context) (*apiv1.CapacityList, error) {
	return call[apiv1.CapacityList](ctx, c, http.MethodGet, "/v1/capacity", nil, nil)
}

// CreateProject creates a project (admin). The returned Token is shown only
// this once.
func (c *Client) CreateProject(ctx context.Context, projectID string) (*apiv1.Project, error) {
	return call[apiv1.Project](ctx, c, http.MethodPost, "/v1/admin/projects", nil, apiv1.CreateProjectRequest{ProjectID: projectID})
}

// CreateToken issues another token for an existing project (admin); the
// returned Project carries it, shown this once.
func (c *Client) CreateToken(ctx context.Context, projectID string) (*apiv1.Project, error) {
	return call[apiv1.Project](ctx, c, http.MethodPost, "/v1/admin/projects/"+url.PathEscape(projectID)+"/tokens", nil, struct{}{})
}

// TokenScope says whose tokens a token call manages: the caller's own
// (the zero value: its project's, or the operator tokens for an operator
// token), or, for an operator, the project ProjectID's.
type TokenScope struct {
	ProjectID string
}

func (s TokenScope) path(rest ...string) string {
	p := "/v1/tokens"
	if s.ProjectID != "" {
		p = "/v1/admin/projects/" + url.PathEscape(s.ProjectID) + "/tokens"
	}
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// ListTokens lists the tokens of scope, oldest first, without secrets.
func (c *Client) ListTokens(ctx context.Context, scope TokenScope) (*apiv1.TokenList, error) {
	return call[apiv1.TokenList](ctx, c, http.MethodGet, scope.path(), nil, nil)
}

// NewToken makes a token in scope; its secret (Token) is shown this once.
func (c *Client) NewToken(ctx context.Context, scope TokenScope, req apiv1.CreateTokenRequest) (*apiv1.Token, error) {
	return call[apiv1.Token](ctx, c, http.MethodPost, scope.path(), nil, req)
}

// RevokeToken revokes token id of scope: it stops working at once.
func (c *Client) RevokeToken(ctx context.Context, scope TokenScope, id string) (*apiv1.Token, error) {
	return call[apiv1.Token](ctx, c, http.MethodDelete, scope.path(id), nil, nil)
}

// RotateToken replaces token id of scope by a new one (same name and
// lifetime) and revokes it; the new secret is shown this once.
func (c *Client) RotateToken(ctx context.Context, scope TokenScope, id string) (*apiv1.Token, error) {
	return call[apiv1.Token](ctx, c, http.MethodPost, scope.path(id, "rotate"), nil, struct{}{})
}

// CheckpointAdvice asks for the checkpoint interval of a job in region and
// gpuType whose checkpoints take cost, from the measured preemption rate.
func (c *Client) CheckpointAdvice(ctx context.Context, region, gpuType string, cost time.Duration) (*apiv1.CheckpointAdvice, error) {
	return c.CheckpointAdviceForRun(ctx, region, gpuType, cost, time.Time{}, 0)
}

// CheckpointAdviceForRun is CheckpointAdvice for a run of hours from
// start (zero: now), from the pool's rate in those hours of the week; 0
// hours: the window's rate, as CheckpointAdvice.
func (c *Client) CheckpointAdviceForRun(ctx context.Context, region, gpuType string, cost time.Duration, start time.Time, hours int) (*apiv1.CheckpointAdvice, error) {
	q := url.Values{"region": {region}, "gpu_type": {gpuType}, "checkpoint_seconds": {strconv.FormatFloat(cost.Seconds(), 'f', -1, 64)}}
	if hours > 0 {
		q.Set("run_hours", strconv.Itoa(hours))
		if !start.IsZero() {
			q.Set("run_start", start.UTC().Format(time.RFC3339))
		}
	}
	return call[apiv1.CheckpointAdvice](ctx, c, http.MethodGet, "/v1/advice/checkpoint", q, nil)
}

// PlanQuery is a plan's question (GET /v1/plan); zero fields are left
// to the server's defaults, RatePercentPerHour < 0 to the measured rate.
type PlanQuery struct {
	Region, GPUType               string
	GPUHours                      float64
	GPUs                          int
	Checkpoint, Restart, Interval time.Duration
	CheckpointAtNotice            bool
	Deadline                      time.Duration
	RatePercentPerHour            float64
}

// Plan asks what a job would cost and take on preemptible and standard
// nodes, and with a deadline the plan that meets it.
func (c *Client) Plan(ctx context.Context, p PlanQuery) (*apiv1.Plan, error) {
	return call[apiv1.Plan](ctx, c, http.MethodGet, "/v1/plan", p.values(), nil)
}

// PlanOptions plans the job of p (its Region and GPUType ignored) in
// every pool in regions and of gpuTypes (empty: any), ranked.
func (c *Client) PlanOptions(ctx context.Context, p PlanQuery, regions, gpuTypes []string) (*apiv1.PlanOptions, error) {
	q := p.values()
	q.Del("region")
	q.Del("gpu_type")
	if len(regions) > 0 {
		q.Set("regions", strings.Join(regions, ","))
	}
	if len(gpuTypes) > 0 {
		q.Set("gpu_types", strings.Join(gpuTypes, ","))
	}
	return call[apiv1.PlanOptions](ctx, c, http.MethodGet, "/v1/plan/options", q, nil)
}

// values is p as a query.
func (p PlanQuery) values() url.Values {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	q := url.Values{"region": {p.Region}, "gpu_type": {p.GPUType}, "gpu_hours": {f(p.GPUHours)}}
	if p.GPUs > 0 {
		q.Set("gpus", strconv.Itoa(p.GPUs))
	}
	for name, d := range map[string]time.Duration{"checkpoint_seconds": p.Checkpoint, "restart_seconds": p.Restart, "interval_seconds": p.Interval} {
		if d > 0 {
			q.Set(name, f(d.Seconds()))
		}
	}
	if p.Deadline > 0 {
		q.Set("deadline_hours", f(p.Deadline.Hours()))
	}
	if p.CheckpointAtNotice {
		q.Set("checkpoint_at_notice", "true")
	}
	if p.RatePercentPerHour >= 0 {
		q.Set("rate_percent_per_hour", f(p.RatePercentPerHour))
	}
	return q
}

// CreateSimulation queues a simulation (admin).
func (c *Client) CreateSimulation(ctx context.Context, req apiv1.CreateSimulationRequest) (*apiv1.Simulation, error) {
	return call[apiv1.Simulation](ctx, c, http.MethodPost, "/v1/simulations", nil, req)
}

// ListSimulations lists the simulations kept, newest first (admin).
func (c *Client) ListSimulations(ctx context.Context) (*apiv1.SimulationList, error) {
	return call[apiv1.SimulationList](ctx, c, http.MethodGet, "/v1/simulations", nil, nil)
}

// GetSimulation reads a simulation, with its result once done (admin).
func (c *Client) GetSimulation(ctx context.Context, id string) (*apiv1.Simulation, error) {
	return call[apiv1.Simulation](ctx, c, http.MethodGet, "/v1/simulations/"+url.PathEscape(id), nil, nil)
}

// CancelSimulation stops a queued or running simulation (admin).
func (c *Client) CancelSimulation(ctx context.Context, id string) (*apiv1.Simulation, error) {
	return call[apiv1.Simulation](ctx, c, http.MethodPost, "/v1/simulations/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// WhoAmI tells whether the token is the admin's or which project's.
func (c *Client) WhoAmI(ctx context.Context) (*apiv1.WhoAmI, error) {
	return call[apiv1.WhoAmI](ctx, c, http.MethodGet, "/v1/whoami", nil, nil)
}

// ListProjects lists projects (admin), without tokens.
func (c *Client) ListProjects(ctx context.Context) (*apiv1.ProjectList, error) {
	return call[apiv1.ProjectList](ctx, c, http.MethodGet, "/v1/admin/projects", nil, nil)
}

// CreateMachines registers machines in the fleet (admin).
func (c *Client) CreateMachines(ctx context.Context, req apiv1.CreateMachinesRequest) (*apiv1.MachineList, error) {
	return call[apiv1.MachineList](ctx, c, http.MethodPost, "/v1/admin/machines", nil, req)
}

// ListMachinesOptions filters ListMachines; empty fields do not filter.
type ListMachinesOptions struct {
	Region  string
	GPUType string
	State   string
}

// ListMachines lists the fleet's machines (admin).
func (c *Client) ListMachines(ctx context.Context, opts ListMachinesOptions) (*apiv1.MachineList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"region": opts.Region, "gpu_type": opts.GPUType, "state": opts.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return call[apiv1.MachineList](ctx, c, http.MethodGet, "/v1/admin/machines", q, nil)
}

// SetClusterWeight sets a cluster's weight in the fair sharing of spare
// capacity, 1..1000 (admin).
func (c *Client) SetClusterWeight(ctx context.Context, id string, weight int) (*apiv1.Cluster, error) {
	return call[apiv1.Cluster](ctx, c, http.MethodPatch, "/v1/admin/clusters/"+url.PathEscape(id), nil,
		apiv1.SetClusterWeightRequest{Weight: &weight})
}

// UpdateMachine changes a machine (admin), for example takes it out of
// service.
func (c *Client) UpdateMachine(ctx context.Context, id string, req apiv1.UpdateMachineRequest) (*apiv1.Machine, error) {
	return call[apiv1.Machine](ctx, c, http.MethodPatch, "/v1/admin/machines/"+url.PathEscape(id), nil, req)
}

// CreateReservation reserves capacity for a project (admin).
func (c *Client) CreateReservation(ctx context.Context, req apiv1.CreateReservationRequest) (*apiv1.Reservation, error) {
	return call[apiv1.Reservation](ctx, c, http.MethodPost, "/v1/admin/reservations", nil, req)
}

// ListReservations lists reservations (admin).
func (c *Client) ListReservations(ctx context.Context) (*apiv1.ReservationList, error) {
	return call[apiv1.ReservationList](ctx, c, http.MethodGet, "/v1/admin/reservations", nil, nil)
}

// Healthz checks that the server is up.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Readyz checks that the server is ready to serve.
func (c *Client) Readyz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// Storage reads what each project's input makes the server keep against
// its quota: a project token its own, the admin every project's (or
// project's, when not empty).
func (c *Client) Storage(ctx context.Context, project string) (*apiv1.Storage, error) {
	q := url.Values{}
	if project != "" {
		q.Set("project_id", project)
	}
	return call[apiv1.Storage](ctx, c, http.MethodGet, "/v1/storage", q, nil)
}

// SetStorageQuota sets a project's storage quota in bytes, 0 for the
// server's default (admin).
func (c *Client) SetStorageQuota(ctx context.Context, project string, bytes int64) error {
	return c.do(ctx, http.MethodPut, "/v1/admin/projects/"+url.PathEscape(project)+"/storage-quota", nil,
		apiv1.SetStorageQuotaRequest{Bytes: bytes}, nil)
}

// OpenAPI reads the server's OpenAPI document, the contract this client
// keeps.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, "/v1/openapi.json", nil, nil, &out)
}
