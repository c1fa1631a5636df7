package kubeenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// ApplyFieldManager is the field manager of Env.Apply's server-side
// applies.
const ApplyFieldManager = "kubeenv-test"

// Dynamic returns a dynamic client authenticated as the admin, for kinds
// the typed clientset lacks (Kueue's, JobSet's, KubeRay's).
func (e *Env) Dynamic() dynamic.Interface { return e.dyn }

// RESTMapper maps kinds to resources from the API server's discovery,
// cached; Apply resets it when a kind is unknown, and the Env does when
// it installs CRDs.
func (e *Env) RESTMapper() meta.ResettableRESTMapper { return e.mapper }

// Apply server-side applies every object of a YAML stream (documents
// separated by "---", or one JSON object), in order, as field manager
// ApplyFieldManager, forcing conflicts as `kubectl apply --server-side
// --force-conflicts` would: a test applies the very YAML a doc tells users
// to apply. Any kind the API server serves works, CRDs' kinds included; a
// namespaced object without a namespace goes to "default"; after a CRD it
// waits until the CRD is Established. It stops at the first error, which
// names the object.
func (e *Env) Apply(ctx context.Context, data []byte) error {
	objs, err := decodeObjects(data)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := e.applyObject(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// decodeObjects splits a YAML stream into objects, skipping empty
// documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kubeenv: YAML document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("kubeenv: YAML document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("kubeenv: YAML document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
}

func (e *Env) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%s %q", gvk.Kind, obj.GetName())
	mapping, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A CRD applied a moment ago (perhaps by this same call).
		e.mapper.Reset()
		mapping, err = e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("kubeenv: apply %s: %w", what, err)
	}
	var ri dynamic.ResourceInterface = e.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace("default")
		}
		ri = e.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	force := true
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: ApplyFieldManager, Force: &force}); err != nil {
		return fmt.Errorf("kubeenv: apply %s: %w", what, err)
	}
	if gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
		// So that the stream's next objects may be of its kind.
		if err := e.waitEstablished(ctx, obj.GetName()); err != nil {
			return fmt.Errorf("kubeenv: apply %s: %w", what, err)
		}
		e.mapper.Reset()
	}
	return nil
}

func newMapper(d discovery.DiscoveryInterface) *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
}
