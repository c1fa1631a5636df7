// Package admission is sparecap's Kueue AdmissionCheck controller
// (ControllerName). Every pass reads the cluster's AdmissionChecks,
// ResourceFlavors and Workloads from watches, sparecap's nodes of the
// cluster and the pods on them, decides each workload's state of the
// check (Decide, pure) and writes what changed with server-side apply on
// the workload's status, owning only its own entry of
// status.admissionChecks. See package queues for the whole picture.
package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/queues"
)

// FieldManager is the name sparecap's writes go under (managedFields).
const FieldManager = "sparecap"

// DefaultRequeueAfter is the requeueAfterSeconds of a Retry: Kueue puts
// the workload back in its queue that long after the eviction. It stays
// Pending there, holding no capacity, until capacity is back (the check
// gates it), so there is nothing to gain from waiting longer.
const DefaultRequeueAfter = time.Second

// Config is one cluster's check.
type Config struct {
	queues.Base
	// Pods are the driver's watch of the cluster's pods.
	Pods interface {
		Pods
		PodsSynced() bool
	}
	// Tolerations are added to the pinned pod sets: the operator's
	// --preemptible-taint.
	Tolerations  []corev1.Toleration
	RequeueAfter time.Duration
	// Note records a lifecycle event on a node (the controller's
	// RecordNote): the workloads requeued at its notice.
	Note func(driver.NodeNote)
}

// Run runs the check until ctx ends, or returns an error when its watches
// cannot start (Kueue's API is not served).
func Run(ctx context.Context, cfg Config) error {
	if cfg.RequeueAfter <= 0 {
		cfg.RequeueAfter = DefaultRequeueAfter
	}
	cfg.Defaults()
	c := &controller{Config: cfg}
	return queues.Run(ctx, cfg.Base, queues.Integration{Name: "Kueue admission check " + ControllerName,
		Effect: refusedEffect, Watch: []schema.GroupVersionResource{WorkloadsGVR, ChecksGVR, FlavorsGVR},
		Pass: func(ctx context.Context, w *queues.Watches, refused *queues.Refusals) error {
			c.w, c.refused = w, refused
			return c.pass(ctx)
		}})
}

type controller struct {
	Config
	w       *queues.Watches
	refused *queues.Refusals
}

const refusedEffect = "Kueue's admission check " + ControllerName + " cannot admit or requeue workloads"

func (c *controller) pass(ctx context.Context) error {
	checks, err := queues.List[AdmissionCheck](c.w, ChecksGVR)
	if err != nil {
		return err
	}
	var names []string
	var errs []error
	for _, ac := range checks {
		if ac.Spec.ControllerName != ControllerName {
			continue
		}
		names = append(names, ac.Name)
		errs = append(errs, c.activate(ctx, ac))
	}
	if len(names) == 0 {
		return errors.Join(errs...)
	}
	if !c.Pods.PodsSynced() {
		return errors.Join(append(errs, errors.New("the pod watch has not synced"))...)
	}
	workloads, err := queues.List[Workload](c.w, WorkloadsGVR)
	if err != nil {
		return err
	}
	flavors, err := queues.List[ResourceFlavor](c.w, FlavorsGVR)
	if err != nil {
		return err
	}
	view, err := c.Fleet.View(ctx, c.ClusterID)
	if err != nil {
		return err
	}
	in := Input{Now: c.Clock.Now(), Checks: names, Workloads: workloads, Flavors: map[string]map[string]string{},
		View: view, Pods: c.Pods, Tolerations: c.Tolerations, RequeueAfter: int32(c.RequeueAfter / time.Second)}
	for _, f := range flavors {
		in.Flavors[f.Name] = f.Spec.NodeLabels
	}
	ups, err := Decide(in)
	if err != nil {
		return err
	}
	requeued := map[string][]string{} // by node
	for _, u := range ups {
		if err := c.apply(ctx, u); err != nil {
			errs = append(errs, fmt.Errorf("workload %s/%s: %w", u.Namespace, u.Name, err))
			continue
		}
		c.Log.Info("Kueue admission check", "cluster", c.ClusterID, "workload", u.Namespace+"/"+u.Name,
			"state", u.State.State, "message", u.State.Message)
		if u.Node != "" {
			requeued[u.Node] = append(requeued[u.Node], u.Namespace+"/"+u.Name)
		}
	}
	for node, ws := range requeued {
		if c.Note != nil {
			c.Note(driver.NodeNote{ClusterID: c.ClusterID, NodeName: node, Reason: domain.ReasonWorkloadRequeued,
				Message: "Kueue requeues " + strings.Join(ws, ", ") + " at the notice: sparecap's admission check set Retry"})
		}
	}
	return errors.Join(errs...)
}

// apply writes u's state of the check on its workload's status, owning
// that one entry of status.admissionChecks (a list keyed by name). The
// UID is a precondition: a workload recreated under the same name does not
// get another's state.
func (c *controller) apply(ctx context.Context, u Update) error {
	entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&u.State)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": WorkloadsGVR.GroupVersion().String(), "kind": "Workload",
		"metadata": map[string]any{"name": u.Name, "namespace": u.Namespace, "uid": u.UID},
		"status":   map[string]any{"admissionChecks": []any{entry}},
	}}
	_, err = c.Client.Resource(WorkloadsGVR).Namespace(u.Namespace).ApplyStatus(ctx, u.Name, obj,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return c.refused.Check(err, queues.Permission("patch", WorkloadsGVR, "status"), refusedEffect)
}

// activate sets the check's Active condition: Kueue admits nothing through
// a ClusterQueue whose checks are not all active.
func (c *controller) activate(ctx context.Context, ac *AdmissionCheck) error {
	msg := "sparecap admits workloads onto the preemptible capacity of cluster " + c.ClusterID
	since := c.Clock.Now().UTC().Truncate(time.Second)
	if have, ok := cond(ac.Status.Conditions, CondActive); ok && have.Status == metav1.ConditionTrue {
		if have.Message == msg && have.ObservedGeneration == ac.Generation {
			return nil
		}
		since = have.LastTransitionTime.UTC()
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ChecksGVR.GroupVersion().String(), "kind": "AdmissionCheck",
		"metadata": map[string]any{"name": ac.Name, "uid": string(ac.UID)},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": CondActive, "status": "True", "reason": "Active", "message": msg,
			"observedGeneration": ac.Generation,
			"lastTransitionTime": since.Format(time.RFC3339),
		}}},
	}}
	_, err := c.Client.Resource(ChecksGVR).ApplyStatus(ctx, ac.Name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return c.refused.Check(err, queues.Permission("patch", ChecksGVR, "status"), refusedEffect)
}
