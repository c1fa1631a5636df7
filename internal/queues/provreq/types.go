package provreq

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClassName is the provisioningClassName of sparecap's requests. Provider
// classes may not end in kubernetes.io or x-k8s.io, which the autoscaler
// project keeps for its own.
const ClassName = "preemptible.sparecap.dev"

// The condition types of autoscaling.x-k8s.io/v1 (the cluster autoscaler's
// apis/provisioningrequest), which Kueue's provisioning admission check
// reads. CapacityRevoked is never set: Kueue deactivates a running
// workload whose request says so, and a reclaim is not that — the target
// stays and is refilled.
const (
	CondAccepted        = "Accepted"
	CondProvisioned     = "Provisioned"
	CondFailed          = "Failed"
	CondBookingExpired  = "BookingExpired"
	CondCapacityRevoked = "CapacityRevoked"
)

// Parameters a request may set (spec.parameters), as numbers of seconds.
const (
	// ParamFillTimeout: how long the request waits for capacity the pool
	// does not have (no spare capacity, or the cluster's fair share is
	// less) before it is Failed. Default DefaultFillTimeout.
	ParamFillTimeout = "fillTimeoutSeconds"
	// ParamBooking: how long a Provisioned request holds its capacity for
	// pods that have not come; then it is BookingExpired and holds only
	// what its pods use. Default DefaultBooking.
	ParamBooking = "bookingSeconds"
)

var (
	RequestsGVR  = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}
	TemplatesGVR = schema.GroupVersionResource{Version: "v1", Resource: "podtemplates"}
)

// Request is an autoscaling.x-k8s.io/v1 ProvisioningRequest, with the
// fields sparecap reads.
type Request struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		PodSets []struct {
			PodTemplateRef struct {
				Name string `json:"name"`
			} `json:"podTemplateRef"`
			Count int32 `json:"count"`
		} `json:"podSets"`
		ProvisioningClassName string            `json:"provisioningClassName"`
		Parameters            map[string]string `json:"parameters,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

func (r *Request) cond(t string) (metav1.Condition, bool) {
	for _, c := range r.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

func (r *Request) is(t string) bool {
	c, ok := r.cond(t)
	return ok && c.Status == metav1.ConditionTrue
}
