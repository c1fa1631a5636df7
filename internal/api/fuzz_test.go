package api

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// The decoders take outside input: whatever the bytes, they must not
// panic, must fail with a client error (never anything else), and what they
// accept must satisfy every constraint.

func FuzzDecodeCreate(f *testing.F) {
	f.Add(createBody)
	f.Add(`{"cluster_name":"a","region":"r","gpu_type":"g","num_gpus":8}`)
	f.Add(`{"num_gpus":1e400}`)
	f.Add(`{"cluster_name":"a","num_gpus":-9223372036854775808}`)
	f.Add(`[`)
	f.Add(`{"cluster_name":"\u0000"}`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := decodeCreate(strings.NewReader(body))
		if err != nil {
			var bad *badRequest
			if !errors.As(err, &bad) || bad.msg == "" {
				t.Fatalf("error %v is not a client error with a message", err)
			}
			return
		}
		if req.NumGPUs < 8 || req.NumGPUs%8 != 0 || req.NumPreemptibleGPUs < 0 || req.NumPreemptibleGPUs%8 != 0 {
			t.Fatalf("accepted GPU counts %d/%d", req.NumGPUs, req.NumPreemptibleGPUs)
		}
		if !clusterNameRE.MatchString(req.ClusterName) || req.Region == "" || req.GPUType == "" {
			t.Fatalf("accepted %+v", req)
		}
		if req.ClusterType != string(domain.ClusterKubernetes) ||
			(req.BillingType != string(domain.BillingOnDemand) && req.BillingType != string(domain.BillingReserved)) {
			t.Fatalf("accepted types %+v", req)
		}
	})
}

func FuzzDecodeUpdate(f *testing.F) {
	f.Add(`{"num_preemptible_gpus":16}`)
	f.Add(`{"num_gpus":8,"num_preemptible_gpus":0}`)
	f.Add(`{"compute_class":"standard"}`)
	f.Add(`{"gpu_worker_nodes":null}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := decodeUpdate(strings.NewReader(body))
		if err != nil {
			var bad *badRequest
			if !errors.As(err, &bad) || bad.msg == "" {
				t.Fatalf("error %v is not a client error with a message", err)
			}
			return
		}
		if req.NumGPUs == nil && req.NumPreemptibleGPUs == nil {
			t.Fatal("accepted an update that changes nothing")
		}
		if n := req.NumGPUs; n != nil && (*n < 8 || *n%8 != 0) {
			t.Fatalf("accepted num_gpus %d", *n)
		}
		if n := req.NumPreemptibleGPUs; n != nil && (*n < 0 || *n%8 != 0) {
			t.Fatalf("accepted num_preemptible_gpus %d", *n)
		}
	})
}

func FuzzDecodeAdmin(f *testing.F) {
	f.Add(`{"project_id":"acme"}`)
	f.Add(`{"region":"r","gpu_type":"g","count":3,"reservation_id":"x"}`)
	f.Add(`{"region":"r","gpu_type":"g","machine_ids":["a","b"]}`)
	f.Add(`{"out_of_service":true}`)
	f.Fuzz(func(t *testing.T, body string) {
		if p, err := decodeProject(strings.NewReader(body)); err == nil && !idRE.MatchString(p.ProjectID) {
			t.Fatalf("accepted project id %q", p.ProjectID)
		}
		if m, err := decodeMachines(strings.NewReader(body)); err == nil {
			if m.GPUsPerMachine != 8 || (len(m.MachineIDs) == 0 && (m.Count < 1 || m.Count > 10000)) {
				t.Fatalf("accepted machines %+v", m)
			}
		}
		_, _ = decodeReservation(strings.NewReader(body))
		if u, err := decodeMachineUpdate(strings.NewReader(body), fuzzNow); err == nil && u.OutOfService == nil && u.MaintenanceAt == nil {
			t.Fatal("accepted an empty machine update")
		} else if err == nil && u.MaintenanceAt != nil && *u.MaintenanceAt != "" && !u.maintenance.After(fuzzNow) {
			t.Fatalf("accepted maintenance at %s, not ahead of %s", u.maintenance, fuzzNow)
		}
	})
}

// fuzzNow is the time the fuzzed decoders take as now.
var fuzzNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func FuzzDecodeTokenRequest(f *testing.F) {
	f.Add(``)
	f.Add(`{"name":"ci","expires_in":"720h"}`)
	f.Add(`{"expires_at":"2030-01-01T00:00:00Z"}`)
	f.Add(`{"name":"a","name":"b"}`)
	f.Add(`{"expires_in":"9223372036854775807ns"}`)
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		name, expires, err := decodeTokenRequest(strings.NewReader(body), now)
		if err != nil {
			var bad *badRequest
			var ce *clientError
			if !errors.As(err, &bad) && !errors.As(err, &ce) {
				t.Fatalf("error %v is not a client error", err)
			}
			return
		}
		if !domain.ValidName(name) {
			t.Fatalf("accepted name %q", name)
		}
		if !expires.IsZero() && (!expires.After(now) || expires.Sub(now) > maxTokenLife) {
			t.Fatalf("accepted expiry %v", expires)
		}
	})
}
