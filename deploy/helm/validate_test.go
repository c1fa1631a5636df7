package helm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// crdFile is the ServiceMonitor CRD the test API server gets, so that the
// chart's ServiceMonitor is validated like the built-in kinds.
const crdFile = "testdata/servicemonitor-crd.yaml"

// kubeconform validates every rendered object, in strict mode (unknown
// fields and duplicate keys are errors), against JSON schemas made from
// the test API server's OpenAPI document (kubeconform's default schemas
// are downloaded from GitHub, which the test machines cannot reach).
func kubeconform(t *testing.T, r *rendered) {
	t.Helper()
	if err := kubeconformCheck(t, r); err != nil {
		t.Error(err)
	}
}

func kubeconformCheck(t *testing.T, r *rendered) error {
	t.Helper()
	tools(t)
	dir := schemas(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubeconBin, "-strict", "-summary", "-output", "json",
		"-schema-location", filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json"))
	cmd.Stdin = bytes.NewReader(bytes.Join(r.docs, []byte("\n---\n")))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		Summary struct{ Valid, Invalid, Errors, Skipped int }
	}
	if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || res.Summary.Valid != len(r.objects) {
		return fmt.Errorf("kubeconform: %v (want %d valid objects)\n%s%s", err, len(r.objects), out, stderr.String())
	}
	return nil
}

// The JSON schemas kubeconform reads, one file per kind in the layout of
// kubeconform's "standalone-strict" schemas (<kind>-<group>-<version>.json,
// every $ref resolvable within the file, additionalProperties false
// wherever properties are listed), written on demand for the kinds the
// chart renders.
var schemaSet struct {
	sync.Mutex
	loaded  bool
	dir     string
	defs    map[string]any                     // the OpenAPI v2 definitions
	byGVK   map[schema.GroupVersionKind]string // kind -> definition name
	crds    map[schema.GroupVersionKind]any    // kind -> openAPIV3Schema of crdFile
	written map[schema.GroupVersionKind]bool
}

// schemas makes sure the schema directory has a file for every kind of r
// and returns the directory.
func schemas(t *testing.T, r *rendered) string {
	t.Helper()
	s := &schemaSet
	s.Lock()
	defer s.Unlock()
	if !s.loaded {
		loadSchemas(t)
	}
	for _, o := range r.objects {
		gvk := o.GroupVersionKind()
		if s.written[gvk] {
			continue
		}
		var doc map[string]any
		if crd, ok := s.crds[gvk]; ok {
			doc = strictSchema(crd.(map[string]any))
		} else {
			name, ok := s.byGVK[gvk]
			if !ok {
				t.Fatalf("the test API server's OpenAPI document has no definition of %s", gvk)
			}
			doc = strictSchema(s.defs[name].(map[string]any))
			defs := map[string]any{}
			for _, ref := range closure(s.defs, name) {
				if o, ok := overrides[ref]; ok {
					defs[ref] = o
					continue
				}
				defs[ref] = strictSchema(s.defs[ref].(map[string]any))
			}
			doc["definitions"] = defs
		}
		doc["$schema"] = "http://json-schema.org/draft-04/schema#"
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, schemaFile(gvk)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s.written[gvk] = true
	}
	return s.dir
}

// overrides replace definitions of the OpenAPI document that say less than
// the API server accepts: a quantity is {"type": "string"} there, but the
// server takes `cpu: 1` as well as `cpu: "1"`.
var overrides = map[string]any{
	"io.k8s.apimachinery.pkg.api.resource.Quantity": map[string]any{
		"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}},
	},
}

// loadSchemas reads the test API server's OpenAPI v2 document and the CRD's
// schema. Called with schemaSet locked.
func loadSchemas(t *testing.T) {
	t.Helper()
	s := &schemaSet
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := env.Client().Discovery().RESTClient().Get().AbsPath("/openapi/v2").
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET /openapi/v2: %v", err)
	}
	var doc struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("GET /openapi/v2: %v", err)
	}
	s.defs = doc.Definitions
	s.byGVK = map[schema.GroupVersionKind]string{}
	for name, d := range s.defs {
		gvks, _ := d.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 {
			continue // not a kind, or a shared one (DeleteOptions, WatchEvent)
		}
		g := gvks[0].(map[string]any)
		gvk := schema.GroupVersionKind{Group: g["group"].(string), Version: g["version"].(string), Kind: g["kind"].(string)}
		s.byGVK[gvk] = name
	}
	s.crds = map[schema.GroupVersionKind]any{}
	crd := readCRD(t)
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		v := v.(map[string]any)
		sch, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
		s.crds[schema.GroupVersionKind{Group: group, Version: v["name"].(string), Kind: kind}] = sch
	}
	s.dir = filepath.Join(work, "schemas")
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.written = map[schema.GroupVersionKind]bool{}
	s.loaded = true
}

// schemaFile is the file kubeconform looks for with the schema location
// "{{ .ResourceKind }}{{ .KindSuffix }}.json": the kind in lower case, the
// first label of the group and the version (deployment-apps-v1.json,
// servicemonitor-monitoring-v1.json), or only the version for the core
// group (service-v1.json).
func schemaFile(gvk schema.GroupVersionKind) string {
	name := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		name += "-" + strings.ToLower(strings.Split(gvk.Group, ".")[0])
	}
	return name + "-" + strings.ToLower(gvk.Version) + ".json"
}

// closure lists the definitions name refers to, directly or not.
func closure(defs map[string]any, name string) []string {
	seen := map[string]bool{}
	queue := []string{name}
	var out []string
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		refs(defs[n], func(ref string) {
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
				queue = append(queue, ref)
			}
		})
	}
	return out
}

// refs calls f with the definition name of every "#/definitions/..." $ref
// in v.
func refs(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				if name, ok := strings.CutPrefix(s, "#/definitions/"); ok {
					f(name)
				}
				continue
			}
			refs(x, f)
		}
	case []any:
		for _, x := range v {
			refs(x, f)
		}
	}
}

// strictSchema returns a copy of an OpenAPI schema as a JSON schema for
// strict validation, as kubeconform's standalone-strict schemas are made
// (openapi2jsonschema --strict): additionalProperties false wherever
// properties are listed and nothing says otherwise, and int-or-string as
// "a string or an integer".
func strictSchema(s map[string]any) map[string]any {
	if s["format"] == "int-or-string" {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	}
	out := make(map[string]any, len(s)+1)
	for k, v := range s {
		switch k {
		case "properties", "patternProperties", "definitions":
			m := map[string]any{}
			for name, sub := range v.(map[string]any) {
				m[name] = strictAny(sub)
			}
			out[k] = m
		case "items", "additionalProperties", "not", "allOf", "anyOf", "oneOf":
			out[k] = strictAny(v)
		default:
			out[k] = v
		}
	}
	_, props := out["properties"]
	_, additional := out["additionalProperties"]
	if props && !additional && out["x-kubernetes-preserve-unknown-fields"] != true {
		out["additionalProperties"] = false
	}
	return out
}

func strictAny(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return strictSchema(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = strictAny(x)
		}
		return out
	}
	return v
}

// dryRunApply applies every rendered object to the test API server with
// server-side apply, a dry-run and strict field validation, in a namespace
// that enforces the "restricted" Pod Security Standard; then creates (dry
// run) a pod from the Deployment's template there, which that standard
// admits or refuses. Any warning the API server returns (Pod Security,
// deprecations) fails the test too.
func dryRunApply(t *testing.T, r *rendered) {
	t.Helper()
	for _, err := range dryRunCheck(t, r) {
		t.Error(err)
	}
}

func dryRunCheck(t *testing.T, r *rendered) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := clients(t)
	warnings := c.collectWarnings()
	createNamespace(t, r.namespace)
	var errs []error
	force := true
	for i, o := range r.objects {
		gvk := o.GroupVersionKind()
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: the test API server does not serve it: %w", gvk, o.GetName(), err))
			continue
		}
		var res dynamic.ResourceInterface = c.dynamic.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			res = c.dynamic.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		_, err = res.Patch(ctx, o.GetName(), types.ApplyPatchType, r.docs[i], metav1.PatchOptions{
			DryRun: []string{metav1.DryRunAll}, FieldManager: "chart-test", Force: &force, FieldValidation: metav1.FieldValidationStrict,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("server-side apply (dry run, strict) of %s %s: %w", o.GetKind(), o.GetName(), err))
		}
	}
	// The pod is made from the Deployment as parsed, unknown fields
	// dropped (those are the apply's to report).
	var d appsv1.Deployment
	for _, o := range r.objects {
		if o.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				return append(errs, fmt.Errorf("the Deployment: %w", err))
			}
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: r.namespace,
			Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
		Spec: d.Spec.Template.Spec,
	}
	if _, err := c.typed.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
	}); err != nil {
		errs = append(errs, fmt.Errorf("a pod of the Deployment's template (dry run) in a namespace enforcing the restricted Pod Security Standard: %w", err))
	}
	if w := warnings(); len(w) > 0 {
		errs = append(errs, fmt.Errorf("the API server warned:\n%s", strings.Join(w, "\n")))
	}
	return errs
}

// testClients talk to the test API server as the admin, collecting the
// warnings it sends.
type testClients struct {
	dynamic dynamic.Interface
	typed   kubernetes.Interface
	mapper  meta.RESTMapper

	mu       sync.Mutex
	warnings []string
}

func (c *testClients) HandleWarningHeader(code int, agent, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, text)
}

// collectWarnings starts collecting afresh and returns a function giving
// the warnings received since.
func (c *testClients) collectWarnings() func() []string {
	c.mu.Lock()
	c.warnings = nil
	c.mu.Unlock()
	return func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return append([]string(nil), c.warnings...)
	}
}

var (
	clientsOnce sync.Once
	clientsVal  *testClients
	clientsErr  error
)

// clients returns the shared clients, having installed the ServiceMonitor
// CRD first so that the mapper knows it.
func clients(t testing.TB) *testClients {
	t.Helper()
	clientsOnce.Do(func() {
		c := &testClients{}
		cfg := env.RESTConfig()
		cfg.WarningHandler = c
		// JSON, not the protobuf env's clients speak: server-side apply
		// sends YAML and custom resources have no protobuf.
		cfg.ContentConfig = rest.ContentConfig{}
		if c.dynamic, clientsErr = dynamic.NewForConfig(cfg); clientsErr != nil {
			return
		}
		if c.typed, clientsErr = kubernetes.NewForConfig(cfg); clientsErr != nil {
			return
		}
		disc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			clientsErr = err
			return
		}
		if clientsErr = installCRD(c.dynamic); clientsErr != nil {
			return
		}
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
		clientsVal = c
	})
	if clientsErr != nil {
		t.Fatal(clientsErr)
	}
	return clientsVal
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the ServiceMonitor CRD and waits until it is
// established.
func installCRD(dyn dynamic.Interface) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crd, err := parseCRD()
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the ServiceMonitor CRD: %w", err)
	}
	for {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the ServiceMonitor CRD is not established (last error: %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func parseCRD() (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(crdFile)
	if err != nil {
		return nil, err
	}
	js, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", crdFile, err)
	}
	crd := &unstructured.Unstructured{}
	if err := crd.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("%s: %w", crdFile, err)
	}
	return crd, nil
}

func readCRD(t testing.TB) *unstructured.Unstructured {
	t.Helper()
	crd, err := parseCRD()
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// createNamespace creates ns, enforcing (and warning about) the
// "restricted" Pod Security Standard. Namespaces are never deleted: with
// no namespace controller they would stay Terminating.
func createNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := clients(t).typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestValidationCatchesMistakes makes sure the checks TestChart relies on
// are not vacuous: each mistake, spliced into a good rendering, must be
// caught by kubeconform, by the API server, or by both, as marked.
func TestValidationCatchesMistakes(t *testing.T) {
	kv := kubeVersion(t)
	for i, c := range []struct {
		name     string
		kind     string // the document changed
		old, new string // the change
		// What kubeconform and the dry run must report (empty: nothing).
		kubeconform, dryRun string
	}{
		{"unknown-field", "Deployment", "imagePullPolicy: IfNotPresent", "imagePullPolicy: IfNotPresent\n          imagePullPolicyy: Always",
			"imagePullPolicyy", "imagePullPolicyy: field not declared in schema"},
		{"duplicate-key", "Deployment", "replicas: 3", "replicas: 3\n  replicas: 2",
			`key \"replicas\" already set in map`, `key "replicas" already set in map`},
		{"wrong-type", "Service", "port: 8407", "port: eighty",
			"/spec/ports/0/port': got string, want integer", ".port: expected numeric"},
		{"servicemonitor-unknown-field", "ServiceMonitor", "path: /metrics", "path: /metrics\n      portt: http",
			"additional properties 'portt' not allowed", "portt: field not declared in schema"},
		{"servicemonitor-bad-interval", "ServiceMonitor", "interval: 30s", "interval: soon",
			"'soon' does not match pattern", `spec.endpoints[0].interval: Invalid value: "soon"`},
		{"privilege-escalation", "Deployment", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true",
			"", `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, fmt.Sprintf("mistake-%d", i), "--kube-version", kv,
				"--set", "postgres.url="+postgresURL, "--set", "serviceMonitor.enabled=true")
			changed := false
			for j, o := range r.objects {
				if o.GetKind() != c.kind {
					continue
				}
				doc := strings.Replace(string(r.docs[j]), c.old, c.new, 1)
				if doc == string(r.docs[j]) {
					t.Fatalf("%q is not in the %s:\n%s", c.old, c.kind, r.docs[j])
				}
				r.docs[j], changed = []byte(doc), true
				// Keep the parsed object in step where it still parses (a
				// duplicate key does not).
				if js, err := utilyaml.ToJSON(r.docs[j]); err == nil {
					u := &unstructured.Unstructured{}
					if u.UnmarshalJSON(js) == nil {
						r.objects[j] = u
					}
				}
			}
			if !changed {
				t.Fatalf("no %s rendered", c.kind)
			}
			err := kubeconformCheck(t, r)
			switch {
			case c.kubeconform == "" && err != nil:
				t.Errorf("kubeconform refused a valid change: %v", err)
			case c.kubeconform != "" && (err == nil || !strings.Contains(err.Error(), c.kubeconform)):
				t.Errorf("kubeconform did not report %q: %v", c.kubeconform, err)
			}
			errs := errors.Join(dryRunCheck(t, r)...)
			if errs == nil || !strings.Contains(errs.Error(), c.dryRun) {
				t.Errorf("the dry run did not report %q: %v", c.dryRun, errs)
			}
			t.Logf("kubeconform: %v\ndry run: %v", err, errs)
		})
	}
}
