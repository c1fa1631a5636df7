package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
)

// maxBody bounds request bodies; no valid request comes near it.
const maxBody = 1 << 20

// badRequest is a client error that names the field at fault.
type badRequest struct {
	field string
	msg   string
}

func (e *badRequest) Error() string { return e.msg }

// echoMax bounds each piece of request text (a key, a value, a field's
// path) that an error echoes: a tenant's 1 MB key is not sent back.
const echoMax = 64

// invalid is a 400 naming field. A message that quotes the request's
// text quotes echo(text).
func invalid(field, format string, args ...any) error {
	return &badRequest{field: bound.Text(field, echoMax), msg: fmt.Sprintf(format, args...)}
}

// echo is text of the request as an error may quote it: cut to echoMax.
func echo(text string) string { return bound.Text(text, echoMax) }

// echof formats the message of an error about a name or ID, each text
// arg (which may be the request's: a path's ID) cut to echoMax.
func echof(format string, args ...any) string {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = bound.Text(s, echoMax)
		}
	}
	return fmt.Sprintf(format, args...)
}

// decodeStrict decodes exactly one JSON object into v, rejecting unknown
// fields, fields in another case, repeated fields and trailing data, with
// messages a person can act on.
func decodeStrict(r io.Reader, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return invalid("", "request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return invalid("", "malformed JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ):
			return invalid(typ.Field, "field %q must be %s, not a JSON %s", echo(typ.Field), jsonKind(typ.Type), echo(typ.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalid(name, "unknown field %q", echo(name))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("", "malformed JSON: unexpected end of input")
		}
		return invalid("", "malformed JSON: %v", err)
	}
	if dec.More() {
		return invalid("", "malformed JSON: data after the object")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); err != io.EOF {
		return invalid("", "malformed JSON: data after the object")
	}
	// encoding/json matches names without regard to case and lets a
	// repeated key win: refuse both, naming the field.
	return checkKeys(data, reflect.TypeOf(v))
}

// jsonKind names what JSON a Go type takes, for a person who wrote JSON
// ("an integer", not Go's "int").
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// readBody reads a request body of at most maxBody bytes; a larger one is
// 413 (the server's body cap, http.MaxBytesReader, may stop it sooner).
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || len(data) > maxBody:
		return nil, &clientError{http.StatusRequestEntityTooLarge, apiv1.CodeTooLarge, "request body larger than the server takes; no request needs that much"}
	case err != nil:
		return nil, invalid("", "read request body: %v", err)
	}
	return data, nil
}

// decodeEmpty accepts an empty body or an empty JSON object, for endpoints
// that take no fields.
func decodeEmpty(r io.Reader) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var v struct{}
	return decodeStrict(bytes.NewReader(data), &v)
}

var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkGPUs validates a GPU count: a multiple of domain.GPUStep, at least
// min, and not absurd.
func checkGPUs(field string, n, min int) error {
	switch {
	case n < min && min > 0:
		return invalid(field, "%s must be at least %d (every cluster needs at least one standard node of %d GPUs); got %d", field, min, domain.GPUStep, n)
	case n < 0:
		return invalid(field, "%s must not be negative; got %d", field, n)
	case n%domain.GPUStep != 0:
		return invalid(field, "%s must be a multiple of %d (one node is %d GPUs); got %d", field, domain.GPUStep, domain.GPUStep, n)
	case n > 1_000_000:
		return invalid(field, "%s of %d is more than any fleet holds", field, n)
	}
	return nil
}

// decodeCreate decodes and validates a create request, filling defaults.
// Whether the region and GPU type exist is checked against the fleet by
// the caller.
func decodeCreate(r io.Reader) (apiv1.CreateClusterRequest, error) {
	var req apiv1.CreateClusterRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	if req.ClusterType == "" {
		req.ClusterType = string(domain.ClusterKubernetes)
	}
	if req.BillingType == "" {
		req.BillingType = string(domain.BillingOnDemand)
	}
	switch {
	case req.ClusterName == "":
		return req, invalid("cluster_name", "cluster_name is required")
	case !clusterNameRE.MatchString(req.ClusterName):
		return req, invalid("cluster_name", "cluster_name %q must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", echo(req.ClusterName))
	case req.Region == "":
		return req, invalid("region", "region is required")
	case req.GPUType == "":
		return req, invalid("gpu_type", "gpu_type is required")
	case req.ClusterType != string(domain.ClusterKubernetes) && req.ClusterType != string(domain.ClusterSlurm):
		return req, invalid("cluster_type", "cluster_type must be KUBERNETES or SLURM; got %q", echo(req.ClusterType))
	case req.ClusterType == string(domain.ClusterSlurm) && req.Kubeconfig != "":
		return req, invalid("kubeconfig", "a SLURM cluster has no kubeconfig; attach its slurm.conf (PUT /v1/admin/clusters/{id}/slurm)")
	case req.BillingType != string(domain.BillingOnDemand) && req.BillingType != string(domain.BillingReserved):
		return req, invalid("billing_type", "billing_type must be ON_DEMAND or RESERVED; got %q", echo(req.BillingType))
	}
	if err := checkGPUs("num_gpus", req.NumGPUs, domain.GPUStep); err != nil {
		return req, err
	}
	if err := checkGPUs("num_preemptible_gpus", req.NumPreemptibleGPUs, 0); err != nil {
		return req, err
	}
	if err := checkGPUs("max_preemptible_gpus", req.MaxPreemptibleGPUs, 0); err != nil {
		return req, err
	}
	if req.ClusterType == string(domain.ClusterSlurm) && req.MaxPreemptibleGPUs > 0 {
		return req, errSlurmQueue()
	}
	return req, checkCreatePreemptible(&req)
}

// maxPreemptibleTypes bounds a cluster's preemptible GPU types.
const maxPreemptibleTypes = 8

// checkTypes checks a list of preemptible GPU types: names, at most
// maxPreemptibleTypes, each once.
func checkTypes(types []string) error {
	if len(types) > maxPreemptibleTypes {
		return invalid("preemptible_gpu_types", "preemptible_gpu_types names at most %d GPU types; got %d", maxPreemptibleTypes, len(types))
	}
	for i, t := range types {
		if !domain.ValidName(t) {
			return invalid("preemptible_gpu_types", "preemptible_gpu_types[%d] %q is not a GPU type name", i, echo(t))
		}
		if slices.Contains(types[:i], t) {
			return invalid("preemptible_gpu_types", "preemptible_gpu_types names %s twice", t)
		}
	}
	return nil
}

// errSlurmQueue refuses a queue's maximum on a SLURM cluster: its
// requests come through ProvisioningRequests, a Kubernetes API.
func errSlurmQueue() error {
	return invalid("max_preemptible_gpus", "max_preemptible_gpus is for KUBERNETES clusters, whose queue asks for capacity with ProvisioningRequests; a SLURM cluster's target is set with num_preemptible_gpus")
}

// updateBody accepts every field a tenant might try to PATCH, so that the
// ones that cannot change get a message saying why rather than "unknown
// field".
type updateBody struct {
	NumGPUs            *int            `json:"num_gpus"`
	NumPreemptibleGPUs *int            `json:"num_preemptible_gpus"`
	MaxPreemptibleGPUs *int            `json:"max_preemptible_gpus"`
	ClusterName        *string         `json:"cluster_name"`
	Region             *string         `json:"region"`
	GPUType            *string         `json:"gpu_type"`
	ClusterType        *string         `json:"cluster_type"`
	BillingType        *string         `json:"billing_type"`
	ProjectID          *string         `json:"project_id"`
	ComputeClass       *string         `json:"compute_class"`
	PreemptibleTypes   json.RawMessage `json:"preemptible_gpu_types"`
	GPUWorkerNodes     json.RawMessage `json:"gpu_worker_nodes"`
	StartsAt           *time.Time      `json:"starts_at"`
	// Preemptible types, strategy and cap: preemptible.go.
	PreemptibleStrategy      *string `json:"preemptible_strategy"`
	MaxPreemptiblePerGPUHour *string `json:"max_preemptible_per_gpu_hour"`
}

func decodeUpdate(r io.Reader) (apiv1.UpdateClusterRequest, error) {
	var b updateBody
	if err := decodeStrict(r, &b); err != nil {
		return apiv1.UpdateClusterRequest{}, err
	}
	if b.ComputeClass != nil || b.GPUWorkerNodes != nil {
		return apiv1.UpdateClusterRequest{}, invalid("compute_class",
			"a cluster's nodes are not changed here: convert one node with POST /v1/clusters/{id}/nodes/{node}/convert, or change num_gpus or num_preemptible_gpus and nodes of the right class are added and removed")
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"cluster_name", b.ClusterName != nil}, {"region", b.Region != nil}, {"gpu_type", b.GPUType != nil},
		{"cluster_type", b.ClusterType != nil}, {"billing_type", b.BillingType != nil}, {"project_id", b.ProjectID != nil},
	} {
		if f.set {
			return apiv1.UpdateClusterRequest{}, invalid(f.name, "%s cannot be changed after creation; only %s can", f.name, updatable)
		}
	}
	if b.StartsAt != nil {
		if b.NumGPUs != nil || b.NumPreemptibleGPUs != nil || b.MaxPreemptibleGPUs != nil ||
			b.PreemptibleTypes != nil || b.PreemptibleStrategy != nil || b.MaxPreemptiblePerGPUHour != nil {
			return apiv1.UpdateClusterRequest{}, invalid("starts_at", "starts_at moves a booking: change it alone")
		}
		return apiv1.UpdateClusterRequest{StartsAt: b.StartsAt}, nil
	}
	var out apiv1.UpdateClusterRequest
	if err := decodeUpdatePreemptible(&b, &out); err != nil {
		return out, err
	}
	if b.NumGPUs == nil && b.NumPreemptibleGPUs == nil && b.MaxPreemptibleGPUs == nil &&
		out.PreemptibleGPUTypes == nil && out.PreemptibleStrategy == nil && out.MaxPreemptiblePerGPUHour == nil {
		return apiv1.UpdateClusterRequest{}, invalid("", "nothing to update; set %s", updatable)
	}
	if b.NumGPUs != nil {
		if err := checkGPUs("num_gpus", *b.NumGPUs, domain.GPUStep); err != nil {
			return apiv1.UpdateClusterRequest{}, err
		}
	}
	if b.NumPreemptibleGPUs != nil {
		if err := checkGPUs("num_preemptible_gpus", *b.NumPreemptibleGPUs, 0); err != nil {
			return apiv1.UpdateClusterRequest{}, err
		}
	}
	if b.MaxPreemptibleGPUs != nil {
		if err := checkGPUs("max_preemptible_gpus", *b.MaxPreemptibleGPUs, 0); err != nil {
			return apiv1.UpdateClusterRequest{}, err
		}
	}
	out.NumGPUs, out.NumPreemptibleGPUs, out.MaxPreemptibleGPUs = b.NumGPUs, b.NumPreemptibleGPUs, b.MaxPreemptibleGPUs
	return out, nil
}

var idRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)

func checkID(field, v string) error {
	if !idRE.MatchString(v) {
		return invalid(field, "%s %q must be 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit", field, echo(v))
	}
	return nil
}

func decodeProject(r io.Reader) (apiv1.CreateProjectRequest, error) {
	var req apiv1.CreateProjectRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	if req.ProjectID == "" {
		return req, invalid("project_id", "project_id is required")
	}
	return req, checkID("project_id", req.ProjectID)
}

func decodeMachines(r io.Reader) (apiv1.CreateMachinesRequest, error) {
	var req apiv1.CreateMachinesRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	if req.GPUsPerMachine == 0 {
		req.GPUsPerMachine = domain.DefaultGPUsPerMachine
	}
	switch {
	case req.Region == "":
		return req, invalid("region", "region is required")
	case req.GPUType == "":
		return req, invalid("gpu_type", "gpu_type is required")
	case len(req.MachineIDs) > 0 && req.Count != 0 && req.Count != len(req.MachineIDs):
		return req, invalid("count", "count %d does not match the %d machine_ids given", req.Count, len(req.MachineIDs))
	case len(req.MachineIDs) == 0 && (req.Count < 1 || req.Count > 10000):
		return req, invalid("count", "count must be between 1 and 10000; got %d", req.Count)
	case req.GPUsPerMachine != domain.GPUStep:
		return req, invalid("gpus_per_machine", "gpus_per_machine must be %d (one node is %d GPUs); got %d", domain.GPUStep, domain.GPUStep, req.GPUsPerMachine)
	}
	if err := checkNames(req.Region, req.GPUType); err != nil {
		return req, err
	}
	for _, id := range req.MachineIDs {
		if err := checkID("machine_ids", id); err != nil {
			return req, err
		}
	}
	if req.ReservationID != "" {
		if err := checkID("reservation_id", req.ReservationID); err != nil {
			return req, err
		}
	}
	return req, nil
}

func decodeReservation(r io.Reader) (apiv1.CreateReservationRequest, error) {
	var req apiv1.CreateReservationRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	switch {
	case req.ProjectID == "":
		return req, invalid("project_id", "project_id is required")
	case req.Region == "":
		return req, invalid("region", "region is required")
	case req.GPUType == "":
		return req, invalid("gpu_type", "gpu_type is required")
	}
	if err := checkNames(req.Region, req.GPUType); err != nil {
		return req, err
	}
	if req.ReservationID != "" {
		if err := checkID("reservation_id", req.ReservationID); err != nil {
			return req, err
		}
	}
	return req, nil
}

// checkNames refuses a region or GPU type name the fleet file would
// refuse: every tenant sees these names, in the console and in terminals.
func checkNames(region, gpuType string) error {
	for _, f := range []struct{ name, v string }{{"region", region}, {"gpu_type", gpuType}} {
		if f.v != "" && !domain.ValidName(f.v) {
			return invalid(f.name, "%s %s is not a valid name: 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", f.name, strconv.QuoteToASCII(truncate(f.v, 80)))
		}
	}
	return nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func decodeWeight(r io.Reader) (apiv1.SetClusterWeightRequest, error) {
	var req apiv1.SetClusterWeightRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	switch {
	case req.Weight == nil:
		return req, invalid("weight", "nothing to update; set weight (an integer from 1 to %d)", domain.MaxWeight)
	case *req.Weight < 1 || *req.Weight > domain.MaxWeight:
		return req, invalid("weight", "weight must be an integer from 1 to %d; got %d", domain.MaxWeight, *req.Weight)
	}
	return req, nil
}

func decodeConvert(r io.Reader) (apiv1.ConvertNodeRequest, error) {
	var req apiv1.ConvertNodeRequest
	if err := decodeStrict(r, &req); err != nil {
		return req, err
	}
	switch domain.ComputeClass(req.ComputeClass) {
	case domain.Standard, domain.Preemptible:
		return req, nil
	case "":
		return req, invalid("compute_class", "set compute_class to the class to convert the node to: standard or preemptible")
	}
	return req, invalid("compute_class", "compute_class must be standard or preemptible; got %q", bound.Text(req.ComputeClass, 64))
}

// machineUpdate is a machine's update, its maintenance time parsed.
type machineUpdate struct {
	apiv1.UpdateMachineRequest
	maintenance time.Time
}

func decodeMachineUpdate(r io.Reader, now time.Time) (machineUpdate, error) {
	var req machineUpdate
	if err := decodeStrict(r, &req.UpdateMachineRequest); err != nil {
		return req, err
	}
	if req.OutOfService == nil && req.MaintenanceAt == nil {
		return req, invalid("out_of_service", "nothing to update; set out_of_service and/or maintenance_at")
	}
	if req.MaintenanceAt == nil || *req.MaintenanceAt == "" {
		return req, nil
	}
	at, err := time.Parse(time.RFC3339, *req.MaintenanceAt)
	switch {
	case err != nil:
		return req, invalid("maintenance_at", "maintenance_at %q is not an RFC 3339 time (2026-12-08T09:00:00Z), or \"\" to cancel", echo(bound.Text(*req.MaintenanceAt, 64)))
	case !at.After(now):
		return req, invalid("maintenance_at", "maintenance_at %s is not in the future; to take the machine out now set out_of_service", at.UTC().Format(time.RFC3339))
	case at.Sub(now) > maxBookAhead:
		return req, invalid("maintenance_at", "maintenance_at %s is more than a year ahead", at.UTC().Format(time.RFC3339))
	}
	req.maintenance = at.UTC().Truncate(time.Second)
	return req, nil
}
