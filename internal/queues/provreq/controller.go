// Package provreq reconciles the ProvisioningRequest class ClassName
// (autoscaling.x-k8s.io/v1): every pass reads the cluster's requests and
// pod templates from watches and sparecap's view of the cluster, decides
// what the requests ask for and their conditions (Decide, pure), records
// the first as the cluster's requested GPUs (which raises or lowers its
// preemptible target, within the maximum the tenant set) and writes the
// conditions with server-side apply. See package queues.
package provreq

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
)

// FieldManager is the name sparecap's writes go under.
const FieldManager = "sparecap"

// Config is one cluster's reconciler.
type Config struct {
	queues.Base
	// Pods are the driver's watch of the cluster's pods: what the pods
	// consuming a request use.
	Pods interface {
		PodsConsuming(namespace, name string) ([]kube.PodUse, error)
		PodsSynced() bool
	}
}

// Run reconciles the cluster's requests until ctx ends, or returns an
// error when its watches cannot start (the API is not served). What the
// requests asked for stays recorded when it stops (a new leader takes
// over from there); the manager drops it when the cluster is detached.
func Run(ctx context.Context, cfg Config) error {
	cfg.Defaults()
	r := &reconciler{Config: cfg}
	return queues.Run(ctx, cfg.Base, queues.Integration{Name: "ProvisioningRequest class " + ClassName,
		Effect: refusedEffect, Watch: []schema.GroupVersionResource{RequestsGVR, TemplatesGVR},
		Pass: func(ctx context.Context, w *queues.Watches, refused *queues.Refusals) error {
			r.w, r.refused = w, refused
			return r.pass(ctx)
		}})
}

type reconciler struct {
	Config
	w       *queues.Watches
	refused *queues.Refusals
}

const refusedEffect = "ProvisioningRequests of class " + ClassName + " are not taken: they neither raise the target nor are marked Provisioned or Failed"

func (r *reconciler) pass(ctx context.Context) error {
	if !r.Pods.PodsSynced() {
		return errors.New("the pod watch has not synced")
	}
	reqs, err := queues.List[Request](r.w, RequestsGVR)
	if err != nil {
		return err
	}
	tmpls, err := queues.List[corev1.PodTemplate](r.w, TemplatesGVR)
	if err != nil {
		return err
	}
	view, err := r.Fleet.View(ctx, r.ClusterID)
	if err != nil {
		return err
	}
	in := Input{Now: r.Clock.Now(), Requests: reqs, Templates: map[string]*corev1.PodTemplate{}, View: view,
		Consumed: func(ns, name string) (int64, error) {
			pods, err := r.Pods.PodsConsuming(ns, name)
			var gpus int64
			for _, p := range pods {
				if !p.Ended {
					gpus += p.GPUs
				}
			}
			return gpus, err
		}}
	for _, t := range tmpls {
		in.Templates[t.Namespace+"/"+t.Name] = t
	}
	out, err := Decide(in)
	if err != nil {
		return err
	}
	// The target first: a request is Provisioned against it.
	var errs []error
	if out.Requested != view.Cluster.RequestedPreemptibleGPUs {
		if err := r.Fleet.SetRequested(ctx, r.ClusterID, out.Requested); err != nil {
			return fmt.Errorf("set requested GPUs: %w", err)
		}
		r.Log.Info("ProvisioningRequests set the preemptible target", "cluster", r.ClusterID,
			"requested_gpus", out.Requested, "max_gpus", view.Cluster.MaxPreemptibleGPUs)
	}
	for _, u := range out.Updates {
		if err := r.apply(ctx, u); err != nil {
			errs = append(errs, fmt.Errorf("request %s/%s: %w", u.Namespace, u.Name, err))
		}
	}
	return errors.Join(errs...)
}

// apply writes u's conditions on its request's status (sparecap is the
// only writer of its class's status). The UID is a precondition.
func (r *reconciler) apply(ctx context.Context, u Update) error {
	conds := make([]any, len(u.Conditions))
	for i := range u.Conditions {
		c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&u.Conditions[i])
		if err != nil {
			return err
		}
		conds[i] = c
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": RequestsGVR.GroupVersion().String(), "kind": "ProvisioningRequest",
		"metadata": map[string]any{"name": u.Name, "namespace": u.Namespace, "uid": u.UID},
		"status":   map[string]any{"conditions": conds},
	}}
	_, err := r.Client.Resource(RequestsGVR).Namespace(u.Namespace).ApplyStatus(ctx, u.Name, obj,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return r.refused.Check(err, queues.Permission("patch", RequestsGVR, "status"),
		"ProvisioningRequests of class "+ClassName+" raise the target but are never marked Provisioned or Failed")
}
