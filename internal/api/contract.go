package api

import (
	"net/http"

	spec "github.com/sparecap/sparecap/api"
	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/openapi"
)

// Info is what the OpenAPI document says of the API as a whole. Version
// is the contract's: a change that breaks clients takes a major step
// (api/compat's TestNoBreakingChange holds it to that).
func Info() openapi.Info {
	return openapi.Info{
		Title:   "sparecap",
		Version: spec.Version,
		Description: "Preemptible GPU capacity lent to tenants' clusters, taken back with a bounded, graceful drain. " +
			"JSON over HTTP; a token in Authorization: Bearer. Every answer carries Sparecap-Time, the server's clock. " +
			"Enumerations marked x-extensible-enum may gain values: clients must accept ones they do not know. See docs/api.md.",
		Server: "http://127.0.0.1:8407",
		Tags: [][2]string{
			{"clusters", "Tenant clusters: standard nodes and a preemptible target."}, {"events", "Lifecycle events, paged or streamed."},
			{"capacity", "The fleet's capacity and its forecast."}, {"statistics", "Preemption rates and the work reclaims lost."},
			{"planning", "Checkpoint advice, job plans and simulations."}, {"billing", "Usage, invoices, prices and storage."},
			{"budgets", "Monthly budgets and their alerts."}, {"tokens", "A project's API tokens."},
			{"webhooks", "Signed deliveries of lifecycle events."}, {"admin", "The operator's: projects, machines, reservations, prices, attachments."},
			{"health", "Liveness, readiness and this document."},
		},
		ErrorBody:  apiv1.Error{},
		Enums:      enums(),
		PathParams: map[string]string{"id": "The object's ID (c-… for a cluster).", "node": "A node's ID (n-…) or name.", "project": "A project's ID.", "token": "A token's ID.", "webhook": "A webhook endpoint's ID."},
	}
}

func enums() map[string]openapi.Enum {
	closed := func(v ...string) openapi.Enum { return openapi.Enum{Values: v} }
	open := func(v ...string) openapi.Enum { return openapi.Enum{Values: v, Open: true} }
	strategies := closed(allocator.InOrder, allocator.LowestPrice, allocator.CapacityOptimized, allocator.PriceCapacityOptimized)
	reasons := make([]string, len(domain.EventReasons))
	for i, r := range domain.EventReasons {
		reasons[i] = string(r)
	}
	return map[string]openapi.Enum{
		// "" is the default (KUBERNETES, ON_DEMAND), as when left out.
		"CreateClusterRequest.cluster_type":         closed("", string(domain.ClusterKubernetes), string(domain.ClusterSlurm)),
		"CreateClusterRequest.billing_type":         closed("", string(domain.BillingOnDemand), string(domain.BillingReserved)),
		"CreateClusterRequest.preemptible_strategy": strategies,
		"UpdateClusterRequest.preemptible_strategy": strategies,
		"Cluster.status": open(string(domain.StatusScheduled), string(domain.StatusWaiting), string(domain.StatusReady),
			string(domain.StatusDegraded), string(domain.StatusDeleting)),
		"Node.status": open(string(domain.NodePending), string(domain.NodeProvisioning), string(domain.NodeReady),
			string(domain.NodeDraining), string(domain.NodeRemoving), string(domain.NodeRemoved)),
		"Node.compute_class":    closed(string(domain.Standard), string(domain.Preemptible)),
		"Unfulfilled.reason":    open(unfulfilledReasons()...),
		"Event.reason":          open(reasons...),
		"ErrorBody.code":        open(errorCodes...),
		"Machine.state":         open(string(domain.MachineFree), string(domain.MachineProvisioning), string(domain.MachineReady), string(domain.MachineDraining), string(domain.MachineRemoving), string(domain.MachineOutOfService)),
		"WebhookDelivery.state": open("pending", "delivered", "failed"),
	}
}

// errorCodes are the codes of apiv1.Error.
var errorCodes = []string{apiv1.CodeInvalid, apiv1.CodeUnauthorized, apiv1.CodeForbidden, apiv1.CodeNotFound, "method_not_allowed",
	apiv1.CodeConflict, apiv1.CodeNoCapacity, apiv1.CodeTooLarge, apiv1.CodeQuotaExceeded, apiv1.CodeRateLimited, apiv1.CodeUnavailable, apiv1.CodeInternal}

func unfulfilledReasons() []string {
	return []string{string(domain.UnfulfilledProvisioning), string(domain.UnfulfilledNoCapacity), string(domain.UnfulfilledFairShare), string(domain.UnfulfilledCoolingDown), string(domain.UnfulfilledWaitingForLease)}
}

// openAPI serves the committed OpenAPI document (api/openapi.json).
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(spec.Document)
}
