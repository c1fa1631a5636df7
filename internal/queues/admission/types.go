package admission

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Kueue objects the check reads and writes, kueue.x-k8s.io/v1beta2
// (Kueue v0.15 and later store this version), with only the fields it
// uses: sparecap does not link Kueue, so a tenant's Kueue of any release
// serving v1beta2 will do.

// ControllerName is what an AdmissionCheck names to be sparecap's:
// spec.controllerName.
const ControllerName = "sparecap.dev/capacity"

// Kueue's check states and condition types.
const (
	StatePending  = "Pending"
	StateReady    = "Ready"
	StateRetry    = "Retry"
	StateRejected = "Rejected"

	condQuotaReserved = "QuotaReserved"
	condAdmitted      = "Admitted"
	condFinished      = "Finished"
	condEvicted       = "Evicted"
	// CondActive on an AdmissionCheck: its controller runs; a ClusterQueue
	// whose checks are not all active admits nothing.
	CondActive = "Active"
)

var (
	group        = "kueue.x-k8s.io"
	version      = "v1beta2"
	WorkloadsGVR = schema.GroupVersionResource{Group: group, Version: version, Resource: "workloads"}
	ChecksGVR    = schema.GroupVersionResource{Group: group, Version: version, Resource: "admissionchecks"}
	FlavorsGVR   = schema.GroupVersionResource{Group: group, Version: version, Resource: "resourceflavors"}
)

// Workload is a Kueue Workload.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorkloadSpec   `json:"spec"`
	Status            WorkloadStatus `json:"status,omitempty"`
}

type WorkloadSpec struct {
	PodSets []PodSet `json:"podSets"`
	// Active false: deactivated (a Rejected check, a requeuing limit).
	Active *bool `json:"active,omitempty"`
}

type PodSet struct {
	Name     string                 `json:"name,omitempty"`
	Template corev1.PodTemplateSpec `json:"template,omitempty"`
	Count    int32                  `json:"count"`
}

type WorkloadStatus struct {
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
	Admission       *Admission         `json:"admission,omitempty"`
	AdmissionChecks []CheckState       `json:"admissionChecks,omitempty"`
}

type Admission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

type PodSetAssignment struct {
	Name    string            `json:"name"`
	Flavors map[string]string `json:"flavors,omitempty"`
	Count   *int32            `json:"count,omitempty"`
}

// CheckState is one admission check's state on a workload.
type CheckState struct {
	Name                string         `json:"name"`
	State               string         `json:"state"`
	LastTransitionTime  metav1.Time    `json:"lastTransitionTime"`
	Message             string         `json:"message"`
	RequeueAfterSeconds *int32         `json:"requeueAfterSeconds,omitempty"`
	PodSetUpdates       []PodSetUpdate `json:"podSetUpdates,omitempty"`
}

// PodSetUpdate is what Kueue adds to a pod set's template when it admits
// the workload.
type PodSetUpdate struct {
	Name         string              `json:"name"`
	Labels       map[string]string   `json:"labels,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// AdmissionCheck is a Kueue AdmissionCheck.
type AdmissionCheck struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ControllerName string `json:"controllerName"`
	} `json:"spec"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

// ResourceFlavor is a Kueue ResourceFlavor: the nodes its quota stands
// for, by their labels.
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	} `json:"spec"`
}

func condTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func cond(conds []metav1.Condition, t string) (metav1.Condition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

// check returns the workload's state of check name.
func (w *Workload) check(name string) (CheckState, bool) {
	for _, c := range w.Status.AdmissionChecks {
		if c.Name == name {
			return c, true
		}
	}
	return CheckState{}, false
}

func (w *Workload) admitted() bool { return condTrue(w.Status.Conditions, condAdmitted) }

// settled: nothing the check does matters to it any more (finished,
// deactivated, or being evicted by Kueue already).
func (w *Workload) settled() bool {
	return condTrue(w.Status.Conditions, condFinished) || condTrue(w.Status.Conditions, condEvicted) ||
		(w.Spec.Active != nil && !*w.Spec.Active)
}
