// Package kubelet stands in for the kubelets of a test cluster (see package
// kubeenv), where nothing runs containers. It does the part of a kubelet's
// job that the API shows: a node registers and reports Ready, and a pod
// being deleted gracefully goes away once its containers have exited after
// SIGTERM, or its grace period has run out.
package kubelet

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Config configures the stand-in. The zero value makes every pod exit at
// once on SIGTERM.
type Config struct {
	// ExitAfter says how long after SIGTERM the pod's containers exit;
	// exits=false means they ignore SIGTERM and are killed when the grace
	// period runs out. Nil means d=0, exits=true.
	ExitAfter func(pod *corev1.Pod) (d time.Duration, exits bool)
	// Terminated, if set, is called once the stand-in has removed a pod it
	// saw being deleted (or saw it removed by someone else), with the time
	// SIGTERM was observed. It runs on the stand-in's goroutines: keep it
	// short.
	Terminated func(pod *corev1.Pod, sigtermAt time.Time)
	// NodeName, if set, limits the stand-in to pods bound to that node, like
	// one real kubelet. Empty: every node's pods.
	NodeName string
	// RunPods makes the stand-in report bound pods Running and Ready, as a
	// kubelet does once containers start. Off by default: it costs a status
	// write per pod.
	RunPods bool
}

// Kubelet is a running stand-in.
type Kubelet struct {
	c       kubernetes.Interface
	cfg     Config
	ctx     context.Context // cancelled by Stop
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	wg      sync.WaitGroup

	mu       sync.Mutex
	sigterm  map[types.NamespacedName]time.Time // kept after the pod is gone
	dying    map[types.UID]*dying
	started  map[types.UID]bool // pods RunPods has taken care of
	stopOnce sync.Once
}

// dying is a pod between SIGTERM and removal.
type dying struct {
	key       types.NamespacedName
	sigtermAt time.Time
	grace     int64          // seconds, the shortest seen
	shorten   chan time.Time // a new, earlier kill deadline
	gone      chan struct{}  // closed when the pod left the API
}

// Start runs the stand-in until ctx is done or Stop is called. It returns
// once the informer's cache has synced, so pods that exist already are
// being handled.
func Start(ctx context.Context, c kubernetes.Interface, cfg Config) (*Kubelet, error) {
	if cfg.ExitAfter == nil {
		cfg.ExitAfter = func(*corev1.Pod) (time.Duration, bool) { return 0, true }
	}
	k := &Kubelet{c: c, cfg: cfg, sigterm: map[types.NamespacedName]time.Time{}, dying: map[types.UID]*dying{}, started: map[types.UID]bool{}}
	k.ctx, k.cancel = context.WithCancel(ctx)
	var opts []informers.SharedInformerOption
	if cfg.NodeName != "" {
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	}
	// No resync: every decision follows from a watch event.
	k.factory = informers.NewSharedInformerFactoryWithOptions(c, 0, opts...)
	inf := k.factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.observe(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { k.observe(obj.(*corev1.Pod)) },
		DeleteFunc: k.deleted,
	}); err != nil {
		return nil, err
	}
	k.factory.Start(k.ctx.Done())
	if !cache.WaitForCacheSync(k.ctx.Done(), inf.HasSynced) {
		k.Stop()
		return nil, errors.New("kubelet: pod informer did not sync: " + context.Cause(k.ctx).Error())
	}
	return k, nil
}

// Stop stops the stand-in and waits for its goroutines. Pods being
// terminated stay as they are.
func (k *Kubelet) Stop() {
	k.stopOnce.Do(func() {
		k.cancel()
		k.factory.Shutdown()
		k.wg.Wait()
	})
}

// SigtermAt returns when the stand-in saw the pod's deletion start (its
// deletionTimestamp appear): the moment a kubelet would send SIGTERM. A pod
// deleted with grace 0 never gets SIGTERM; for it this is when the stand-in
// saw it gone.
func (k *Kubelet) SigtermAt(namespace, name string) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.sigterm[types.NamespacedName{Namespace: namespace, Name: name}]
	return t, ok
}

func (k *Kubelet) observe(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" {
		return // not ours until bound; and unbound pods are deleted at once
	}
	if pod.DeletionTimestamp == nil {
		if k.cfg.RunPods && pod.Status.Phase == corev1.PodPending {
			k.goRun(pod)
		}
		return
	}
	now := time.Now()
	grace := int64(0)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if d, ok := k.dying[pod.UID]; ok {
		// A second delete with a shorter grace period moves the deadline
		// forward, counted from now, as a real kubelet does.
		if grace < d.grace {
			d.grace = grace
			dl := now.Add(time.Duration(grace) * time.Second)
			select { // keep the earlier of a pending deadline and this one
			case old := <-d.shorten:
				dl = minTime(old, dl)
			default:
			}
			d.shorten <- dl // room: only this goroutine sends, under k.mu
		}
		return
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	d := &dying{key: key, sigtermAt: now, grace: grace, shorten: make(chan time.Time, 1), gone: make(chan struct{})}
	k.dying[pod.UID] = d
	k.sigterm[key] = now
	exitAfter, exits := k.cfg.ExitAfter(pod)
	k.wg.Go(func() { k.terminate(d, pod.UID, grace, exitAfter, exits) })
}

// terminate waits until the containers exit or the grace period ends and
// then removes the pod, with grace 0 and a UID precondition so that a new
// pod of the same name is never hit.
func (k *Kubelet) terminate(d *dying, uid types.UID, grace int64, exitAfter time.Duration, exits bool) {
	at := d.sigtermAt.Add(time.Duration(grace) * time.Second)
	if exits {
		at = minTime(at, d.sigtermAt.Add(exitAfter))
	}
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-d.gone:
			return
		case dl := <-d.shorten:
			if dl.Before(at) {
				at = dl
				timer.Reset(time.Until(at))
			}
			continue
		case <-timer.C:
		}
		err := k.c.CoreV1().Pods(d.key.Namespace).Delete(k.ctx, d.key.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		// NotFound: already gone; Conflict: the name now belongs to another pod.
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return // the informer's delete event reports Terminated
		}
		// Transient (e.g. the apiserver is being restarted): try again soon.
		timer.Reset(200 * time.Millisecond)
	}
}

func (k *Kubelet) deleted(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	if pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	k.mu.Lock()
	d, ok := k.dying[pod.UID]
	delete(k.started, pod.UID)
	if ok {
		delete(k.dying, pod.UID)
		close(d.gone)
	} else {
		// Deleted with grace 0 (or before we saw it terminating): the
		// containers are killed now.
		d = &dying{sigtermAt: now, key: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}}
		k.sigterm[d.key] = now
	}
	k.mu.Unlock()
	if k.cfg.Terminated != nil {
		k.cfg.Terminated(pod, d.sigtermAt)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
