package queues

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/sparecap/sparecap/internal/clock"
)

// Watches are informers on custom resources of one cluster (a dynamic
// client: sparecap does not link Kueue's or the autoscaler's types), each
// of whose changes marks the controller dirty.
type Watches struct {
	factory dynamicinformer.DynamicSharedInformerFactory
	dirty   chan struct{}
	byGVR   map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// NewWatches watches gvrs through client, in every namespace. A list or
// watch the cluster forbids is reported through refused (what the tenant
// loses: effect); the watch keeps trying, and syncs once it is granted.
func NewWatches(client dynamic.Interface, refused *Refusals, effect string, gvrs ...schema.GroupVersionResource) (*Watches, error) {
	w := &Watches{factory: dynamicinformer.NewDynamicSharedInformerFactory(client, 0), dirty: make(chan struct{}, 1),
		byGVR: map[schema.GroupVersionResource]cache.SharedIndexInformer{}}
	for _, gvr := range gvrs {
		inf := w.factory.ForResource(gvr).Informer()
		// managedFields are most of a status-heavy object's bytes, and
		// nothing here reads them.
		if err := inf.SetTransform(func(obj any) (any, error) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				u.SetManagedFields(nil)
			}
			return obj, nil
		}); err != nil {
			return nil, err
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			refused.Check(err, Permission("list", gvr, ""), effect)
		}); err != nil {
			return nil, err
		}
		mark := func(any) { w.Mark() }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark,
			UpdateFunc: func(_, obj any) { mark(obj) }, DeleteFunc: mark}); err != nil {
			return nil, err
		}
		w.byGVR[gvr] = inf
	}
	return w, nil
}

// Start runs the informers until ctx ends and waits for their first list.
func (w *Watches) Start(ctx context.Context) error {
	w.factory.Start(ctx.Done())
	for gvr, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watch %s: %w", gvr.Resource, context.Cause(ctx))
		}
	}
	return nil
}

// Dirty receives after a watched object changed (or Mark).
func (w *Watches) Dirty() <-chan struct{} { return w.dirty }

// Mark asks for a pass.
func (w *Watches) Mark() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// List returns the watched objects of gvr, converted to T.
func List[T any](w *Watches, gvr schema.GroupVersionResource) ([]*T, error) {
	inf, ok := w.byGVR[gvr]
	if !ok {
		return nil, fmt.Errorf("%s is not watched", gvr.Resource)
	}
	objs := inf.GetStore().List()
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
			return nil, fmt.Errorf("read %s %s/%s: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Loop calls pass whenever the watches or the fleet changed, and every
// resync besides (deadlines, booking windows, the pods' placement, which
// change without an event of their own), until ctx ends. A pass that
// fails is tried again at the next of these.
func Loop(ctx context.Context, w *Watches, fleet Fleet, clk clock.Clock, resync time.Duration, pass func(context.Context) error, failed func(error)) {
	changed := fleet.Changed()
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.Dirty():
		case <-changed:
			// Take the next channel before the pass, so a commit during it
			// is not missed.
			changed = fleet.Changed()
		case <-clk.After(resync):
		}
	}
}
