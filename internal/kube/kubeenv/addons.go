package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Besides the cluster's own components, the mini cluster can run the batch
// controllers that sparecap's Kueue integration is tested against, built
// by scripts/ensure-kube.sh (Kueue from tools/kueue; JobSet and KubeRay,
// at the versions that Kueue requires, from tools/jobset and
// tools/kuberay) and run as processes like the others:
//
//   - Kueue's manager (Options.Kueue), with its CRDs (v1beta2, the storage
//     version, served without conversion webhooks) and the
//     ProvisioningRequest CRD (autoscaling.x-k8s.io/v1), which Kueue's
//     provisioning admission check controller needs at start;
//   - JobSet's controller (Options.JobSet) and KubeRay's operator
//     (Options.KubeRay), with their CRDs. The CRDs of the integrations
//     Kueue is given are installed even without the controller (Kueue sets
//     up an integration only when its CRD is served).
//
// Each runs with leader election off, its health and metrics endpoints on
// free loopback ports, and, for Kueue and JobSet, its webhooks served on a
// loopback port with a certificate for 127.0.0.1 that the Env's CA signed:
// the webhook configurations of the projects' manifests are installed with
// clientConfig.url https://127.0.0.1:PORT/PATH (instead of their Service)
// and that CA as caBundle, and the selectors the projects' kustomizations
// add. The controllers' own certificate management is off. Start waits
// until each is ready (its readiness endpoint, its webhook port answering
// TLS with that certificate) and until the API server calls its webhooks
// (a dry-run create the mutating webhook defaults and one the validating
// webhook denies), so that the first object a test creates is not
// refused nor let through unseen.
//
// As in a real cluster, the webhooks' failurePolicy is Fail: while Kueue's
// manager is stopped (StopKueue), creating a Job, a JobSet or any pod
// outside kube-system and kueue-system fails.

// DefaultKueueFrameworks are the integrations Kueue is given when
// KueueOptions.Frameworks is empty.
var DefaultKueueFrameworks = []string{"batch/job", "jobset.x-k8s.io/jobset", "ray.io/raycluster", "ray.io/rayjob"}

// KueueNamespace is the namespace Kueue's manager is configured with (its
// Configuration's namespace, where it would keep its Secrets); the Env
// creates it.
const KueueNamespace = "kueue-system"

// KueueOptions configure Kueue's manager: what of its Configuration
// (config.kueue.x-k8s.io/v1beta2) a test may choose. The Env sets the rest:
// loopback addresses, leader election and internal certificate
// management off, a client without throttling, and the feature gate
// VisibilityOnDemand off (the visibility API server would want a
// certificate at the fixed path /visibility).
type KueueOptions struct {
	// Frameworks are integrations.frameworks. Default:
	// DefaultKueueFrameworks.
	Frameworks []string
	// WaitForPodsReady, if set, is waitForPodsReady.
	WaitForPodsReady *KueueWaitForPodsReady
	// ManageJobsWithoutQueueName is manageJobsWithoutQueueName.
	ManageJobsWithoutQueueName bool
	// FeatureGates are added to featureGates.
	FeatureGates map[string]bool
	// Config holds further top-level fields of the Configuration, as they
	// are spelled in its YAML (e.g. "fairSharing", "objectRetentionPolicies");
	// they replace the Env's. Kueue decodes its configuration strictly: an
	// unknown field makes Start fail with Kueue's own message.
	Config map[string]any
	// Args are appended to the manager's flags (e.g. "--zap-log-level=3").
	Args []string
}

// KueueWaitForPodsReady is Kueue's waitForPodsReady: an admitted workload
// whose pods are not all ready within Timeout is evicted and requeued.
type KueueWaitForPodsReady struct {
	Timeout time.Duration
	// BlockAdmission holds back other admissions until the workload's pods
	// are ready.
	BlockAdmission bool
	// RecoveryTimeout, if set, bounds how long an admitted workload's pods
	// may be not ready again (Kueue's default: Timeout; 0 turns it off).
	RecoveryTimeout *time.Duration
	// RequeuingTimestamp is "Eviction" (Kueue's default) or "Creation".
	RequeuingTimestamp string
	// BackoffLimitCount, if set, deactivates a workload evicted that many
	// times.
	BackoffLimitCount *int32
	// BackoffBaseSeconds and BackoffMaxSeconds shape the requeuing backoff
	// (0: Kueue's defaults, 60 and 3600).
	BackoffBaseSeconds, BackoffMaxSeconds int32
}

// config returns waitForPodsReady as the Configuration spells it.
func (w *KueueWaitForPodsReady) config() map[string]any {
	c := map[string]any{"timeout": w.Timeout.String(), "blockAdmission": w.BlockAdmission}
	if w.RecoveryTimeout != nil {
		c["recoveryTimeout"] = w.RecoveryTimeout.String()
	}
	rs := map[string]any{}
	if w.RequeuingTimestamp != "" {
		rs["timestamp"] = w.RequeuingTimestamp
	}
	if w.BackoffLimitCount != nil {
		rs["backoffLimitCount"] = *w.BackoffLimitCount
	}
	if w.BackoffBaseSeconds != 0 {
		rs["backoffBaseSeconds"] = w.BackoffBaseSeconds
	}
	if w.BackoffMaxSeconds != 0 {
		rs["backoffMaxSeconds"] = w.BackoffMaxSeconds
	}
	if len(rs) > 0 {
		c["requeuingStrategy"] = rs
	}
	return c
}

func (o *KueueOptions) frameworks() []string {
	if len(o.Frameworks) == 0 {
		return DefaultKueueFrameworks
	}
	return o.Frameworks
}

// manifestFiles are what KueueManifestsDir must hold: each project's CRDs
// (a directory of YAML files) and webhook manifests, as
// scripts/ensure-kube.sh copies them from the modules' sources.
var manifestFiles = []string{
	"kueue/crds", "kueue/webhook.yaml",
	"jobset/crds", "jobset/webhook.yaml",
	"kuberay/crds",
	"provisioningrequest/crds",
}

// kueueMetricsCerts is where Kueue's manager, without its internal
// certificate management, loads its metrics certificate from (a fixed path
// in cmd/kueue); scripts/ensure-kube.sh writes a self-signed one there.
const kueueMetricsCerts = "/etc/kueue/metrics/certs"

// addonBinaries are the controllers asked for, looked up before anything
// starts so that a missing one fails Start at once.
type addonBinaries struct{ kueue, jobset, kuberay, manifests string }

func findAddonBinaries(opts Options) (b addonBinaries, err error) {
	if opts.Kueue == nil && !opts.JobSet && !opts.KubeRay {
		return b, nil
	}
	if !opts.MiniCluster {
		return b, errors.New("kubeenv: Options.Kueue, JobSet and KubeRay need Options.MiniCluster")
	}
	var errs []error
	add := func(p *string, find func() (string, error)) {
		var err error
		*p, err = find()
		errs = append(errs, err)
	}
	add(&b.manifests, KueueManifestsDir)
	if opts.Kueue != nil {
		add(&b.kueue, KueuePath)
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(kueueMetricsCerts, f)); err != nil {
				errs = append(errs, fmt.Errorf("kubeenv: Kueue's manager needs its metrics certificate: %w; %s", err, hint))
			}
		}
	}
	if opts.JobSet {
		add(&b.jobset, JobSetPath)
	}
	if opts.KubeRay {
		add(&b.kuberay, KubeRayPath)
	}
	return b, errors.Join(errs...)
}

// addon is one controller process with its fixed ports: the same on a
// restart (StartKueue), so the webhook configurations stay right.
type addon struct {
	name  string
	path  string
	nport int
	ports []int // health, metrics, webhook...; picked at the first start
	// args returns the flags for the ports, writing any file they name.
	args func(ports []int) ([]string, error)
	env  []string
	// healthPath is the readiness endpoint on ports[0] (plain HTTP).
	healthPath string
	// webhookPort is the index in ports of the webhook server, or -1.
	webhookPort int
	// webhooks is the project's webhook manifest (under the manifests
	// directory) with the configurations' name prefix, "" for none.
	webhooks, prefix string
	// probe, if set, checks through the API server that the webhooks are
	// called (dry-run creates).
	probe func(ctx context.Context) error
}

// prepareAddons creates Kueue's namespace and installs the CRDs of what
// runs besides the cluster (while the mini cluster starts: the API server
// spends most of Start's time on the largest CRDs).
func (e *Env) prepareAddons(bins addonBinaries) error {
	opts := e.opts
	if opts.Kueue == nil && !opts.JobSet && !opts.KubeRay {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ReadyTimeout)
	defer cancel()
	e.manifests = bins.manifests

	var crds []string
	var frameworks []string
	if opts.Kueue != nil {
		crds = append(crds, "kueue/crds/*.yaml", "provisioningrequest/crds/*.yaml")
		frameworks = opts.Kueue.frameworks()
		if _, err := e.client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubeenv: create namespace %s: %w", KueueNamespace, err)
		}
	}
	if opts.JobSet || slices.Contains(frameworks, "jobset.x-k8s.io/jobset") {
		crds = append(crds, "jobset/crds/*.yaml")
	}
	if opts.KubeRay || slices.ContainsFunc(frameworks, func(f string) bool { return strings.HasPrefix(f, "ray.io/") }) {
		// What KubeRay's operator watches. RayCronJob (a CRD of 0.7 MB,
		// 2-3 s of the API server's CPU) only with its feature gate, off
		// by default.
		crds = append(crds, "kuberay/crds/ray.io_rayclusters.yaml", "kuberay/crds/ray.io_rayjobs.yaml", "kuberay/crds/ray.io_rayservices.yaml")
		if slices.ContainsFunc(opts.KubeRayArgs, func(a string) bool { return strings.Contains(a, "RayCronJob=true") }) {
			crds = append(crds, "kuberay/crds/ray.io_raycronjobs.yaml")
		}
	}
	return e.installCRDs(ctx, crds)
}

// startAddons starts the controllers asked for, all at once, once
// prepareAddons is done.
func (e *Env) startAddons(bins addonBinaries) error {
	opts := e.opts
	if opts.Kueue == nil && !opts.JobSet && !opts.KubeRay {
		return nil
	}
	var addons []*addon
	if opts.Kueue != nil {
		e.kueue = e.kueueAddon(bins.kueue)
		addons = append(addons, e.kueue)
	}
	if opts.JobSet {
		addons = append(addons, e.jobsetAddon(bins.jobset))
	}
	if opts.KubeRay {
		addons = append(addons, e.kuberayAddon(bins.kuberay))
	}
	errs := make([]error, len(addons))
	var wg sync.WaitGroup
	for i, a := range addons {
		wg.Go(func() {
			p, err := e.startAddon(a, true)
			if err != nil {
				errs[i] = err
				return
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closed {
				p.stop()
				errs[i] = errors.New("kubeenv: Env is closed")
				return
			}
			if a == e.kueue {
				e.kueueProc = p
			} else {
				e.addons = append(e.addons, p)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startAddon starts a on its ports (fresh ones at the first start,
// retrying if one was taken meanwhile), waits until it is ready, installs
// its webhook configurations at the first start, and waits until the API
// server calls them.
func (e *Env) startAddon(a *addon, first bool) (*proc, error) {
	for attempt := 0; ; attempt++ {
		if first {
			ports, err := freePorts(a.nport)
			if err != nil {
				return nil, err
			}
			a.ports = ports
		}
		args, err := a.args(a.ports)
		if err != nil {
			return nil, err
		}
		out, closer, err := e.output(a.name)
		if err != nil {
			return nil, err
		}
		p, err := startProcEnv(a.name, a.path, args, a.env, out, closer)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ReadyTimeout, func(ctx context.Context) error {
			if err := e.addonReady(ctx, a); err != nil {
				return err
			}
			return p.owns(a.ports)
		})
		if err == nil {
			err = e.addonWebhooks(a, p, first)
		}
		if err == nil {
			return p, nil
		}
		p.stop()
		if !first || attempt >= 3 || !p.addrInUse() {
			return nil, err
		}
	}
}

// addonReady checks a's readiness endpoint and that its webhook port
// serves the Env's certificate for 127.0.0.1.
func (e *Env) addonReady(ctx context.Context, a *addon) error {
	if err := expect(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(a.ports[0])+a.healthPath, "ok"); err != nil {
		return err
	}
	if a.webhookPort < 0 {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.sec.caPEM)
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(a.ports[a.webhookPort]))
	if err != nil {
		return fmt.Errorf("webhook port: %w", err)
	}
	return conn.Close()
}

// addonWebhooks installs a's webhook configurations (first start only) and
// waits until its probe passes.
func (e *Env) addonWebhooks(a *addon, p *proc, first bool) error {
	if a.webhooks == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if first {
		data, err := os.ReadFile(filepath.Join(e.manifests, a.webhooks))
		if err != nil {
			return err
		}
		objs, err := loopbackWebhooks(data, a.prefix, a.ports[a.webhookPort], e.sec.caPEM)
		if err != nil {
			return fmt.Errorf("kubeenv: %s: %w", a.webhooks, err)
		}
		for _, obj := range objs {
			if err := e.applyObject(ctx, obj); err != nil {
				return err
			}
		}
	}
	if a.probe == nil {
		return nil
	}
	return p.waitReady(ReadyTimeout, func(context.Context) error {
		if err := a.probe(ctx); err != nil {
			return fmt.Errorf("its webhooks, called by the API server: %w", err)
		}
		return nil
	})
}

// webhookSelectors are the selectors the projects' kustomizations
// (config/components/webhook/kustomization.yaml) add to the generated
// webhook manifests for a real installation: Kueue leaves pods,
// Deployments and StatefulSets of kube-system and its own namespace alone,
// JobSet's pod webhooks see only JobSets' pods.
var webhookSelectors = map[string]map[string]map[string]any{
	"kueue-": {
		"mpod.kb.io": {"namespaceSelector": kueueNamespaceSelector}, "vpod.kb.io": {"namespaceSelector": kueueNamespaceSelector},
		"mdeployment.kb.io": {"namespaceSelector": kueueNamespaceSelector}, "vdeployment.kb.io": {"namespaceSelector": kueueNamespaceSelector},
		"mstatefulset.kb.io": {"namespaceSelector": kueueNamespaceSelector}, "vstatefulset.kb.io": {"namespaceSelector": kueueNamespaceSelector},
	},
	"jobset-": {
		"mpod.kb.io": {"objectSelector": jobsetPodSelector}, "vpod.kb.io": {"objectSelector": jobsetPodSelector},
	},
}

var (
	kueueNamespaceSelector = map[string]any{"matchExpressions": []any{map[string]any{
		"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", KueueNamespace}}}}
	jobsetPodSelector = map[string]any{"matchExpressions": []any{map[string]any{
		"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}}}
)

// loopbackWebhooks rewrites a project's webhook configurations for the
// Env: names prefixed as the project's kustomization does, each webhook
// called at https://127.0.0.1:port/PATH with caPEM as its caBundle, and
// the kustomization's selectors.
func loopbackWebhooks(data []byte, prefix string, port int, caPEM []byte) ([]*unstructured.Unstructured, error) {
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if k := obj.GetKind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			return nil, fmt.Errorf("unexpected %s", k)
		}
		obj.SetName(prefix + obj.GetName())
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for _, h := range hooks {
			hook := h.(map[string]any)
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			if path == "" {
				return nil, fmt.Errorf("webhook %v has no clientConfig.service.path", hook["name"])
			}
			hook["clientConfig"] = map[string]any{
				"url":      "https://127.0.0.1:" + strconv.Itoa(port) + path,
				"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			}
			name, _ := hook["name"].(string)
			for k, v := range webhookSelectors[prefix][name] {
				hook[k] = v
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs server-side applies every CRD in the files that the
// patterns (relative to the manifests directory) match, without conversion
// webhooks, and waits until each is Established.
func (e *Env) installCRDs(ctx context.Context, patterns []string) error {
	var crds []*unstructured.Unstructured
	for _, pattern := range patterns {
		files, err := filepath.Glob(filepath.Join(e.manifests, pattern))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("kubeenv: no CRDs at %s; %s", filepath.Join(e.manifests, pattern), hint)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			objs, err := decodeObjects(data)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			crds = append(crds, objs...)
		}
	}
	errs := make([]error, len(crds))
	var wg sync.WaitGroup
	for i, crd := range crds {
		wg.Go(func() {
			// Served as stored: the projects' conversion webhooks only
			// convert between the versions, which the tests do not mix.
			unstructured.RemoveNestedField(crd.Object, "spec", "conversion")
			body, err := json.Marshal(crd)
			if err == nil {
				force := true
				_, err = e.dyn.Resource(crdResource).Patch(ctx, crd.GetName(), types.ApplyPatchType, body,
					metav1.PatchOptions{FieldManager: ApplyFieldManager, Force: &force})
			}
			if err == nil {
				err = e.waitEstablished(ctx, crd.GetName())
			}
			if err != nil {
				errs[i] = fmt.Errorf("kubeenv: CRD %s: %w", crd.GetName(), err)
			}
		})
	}
	wg.Wait()
	e.mapper.Reset()
	return errors.Join(errs...)
}

func (e *Env) waitEstablished(ctx context.Context, name string) error {
	for {
		crd, err := e.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == "Established" && c["status"] == "True" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Established: %w (conditions %v)", ctx.Err(), conds)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *Env) kueueAddon(bin string) *addon {
	ko := e.opts.Kueue
	kubeconfig := filepath.Join(e.dir, "admin.kubeconfig")
	file := filepath.Join(e.dir, "kueue-config.yaml")
	return &addon{
		name:  "kueue",
		path:  bin,
		nport: 3,
		args: func(ports []int) ([]string, error) {
			gates := map[string]bool{"VisibilityOnDemand": false}
			for k, v := range ko.FeatureGates {
				gates[k] = v
			}
			cfg := map[string]any{
				"apiVersion": "config.kueue.x-k8s.io/v1beta2",
				"kind":       "Configuration",
				"namespace":  KueueNamespace,
				"health":     map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(ports[0])},
				"metrics":    map[string]any{"bindAddress": "127.0.0.1:" + strconv.Itoa(ports[1])},
				"webhook": map[string]any{"host": "127.0.0.1", "port": ports[2],
					"certDir": e.sec.servingDir},
				"leaderElection":             map[string]any{"leaderElect": false},
				"internalCertManagement":     map[string]any{"enable": false},
				"clientConnection":           map[string]any{"qps": 1000, "burst": 2000},
				"manageJobsWithoutQueueName": ko.ManageJobsWithoutQueueName,
				"integrations":               map[string]any{"frameworks": ko.frameworks()},
				"featureGates":               gates,
			}
			if ko.WaitForPodsReady != nil {
				cfg["waitForPodsReady"] = ko.WaitForPodsReady.config()
			}
			for k, v := range ko.Config {
				cfg[k] = v
			}
			return configArgs(kubeconfig, file, cfg, ko.Args)
		},
		healthPath:  "/readyz",
		webhookPort: 2,
		webhooks:    "kueue/webhook.yaml",
		prefix:      "kueue-",
		probe:       e.probeKueueWebhooks,
	}
}

// configArgs writes a controller-runtime manager's configuration file
// and returns the arguments that run the manager with it, then extra.
func configArgs(kubeconfig, file string, cfg map[string]any, extra []string) ([]string, error) {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("kubeenv: %s: %w", filepath.Base(file), err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return nil, err
	}
	return append([]string{"--kubeconfig=" + kubeconfig, "--config=" + file}, extra...), nil
}

var resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}

// probeKueueWebhooks dry-run creates two ResourceFlavors: one Kueue's
// mutating webhook gives its finalizer, one its validating webhook denies
// (a taint value no label may have; the CRD's schema lets it through).
func (e *Env) probeKueueWebhooks(ctx context.Context) error {
	rf := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
			"metadata": map[string]any{"name": "kubeenv-webhook-probe"}, "spec": spec}}
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	got, err := e.dyn.Resource(resourceFlavors).Create(ctx, rf(map[string]any{}), dry)
	if err != nil {
		return err
	}
	if !slices.Contains(got.GetFinalizers(), "kueue.x-k8s.io/resource-in-use") {
		return fmt.Errorf("mutating webhook not called: a ResourceFlavor got finalizers %v", got.GetFinalizers())
	}
	bad := rf(map[string]any{"nodeTaints": []any{map[string]any{"key": "kubeenv.test/probe", "value": "not a label value!", "effect": "NoSchedule"}}})
	_, err = e.dyn.Resource(resourceFlavors).Create(ctx, bad, dry)
	if err == nil || !strings.Contains(err.Error(), "vresourceflavor.kb.io") {
		return fmt.Errorf("validating webhook not called: a ResourceFlavor with an invalid taint got %v", err)
	}
	return nil
}

func (e *Env) jobsetAddon(bin string) *addon {
	kubeconfig := filepath.Join(e.dir, "admin.kubeconfig")
	file := filepath.Join(e.dir, "jobset-config.yaml")
	return &addon{
		name:  "jobset",
		path:  bin,
		nport: 3,
		args: func(ports []int) ([]string, error) {
			cfg := map[string]any{
				"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
				"kind":                   "Configuration",
				"health":                 map[string]any{"healthProbeBindAddress": "127.0.0.1:" + strconv.Itoa(ports[0])},
				"metrics":                map[string]any{"bindAddress": "127.0.0.1:" + strconv.Itoa(ports[1]), "certDir": e.sec.servingDir},
				"webhook":                map[string]any{"host": "127.0.0.1", "port": ports[2], "certDir": e.sec.servingDir},
				"leaderElection":         map[string]any{"leaderElect": false},
				"internalCertManagement": map[string]any{"enable": false},
				"clientConnection":       map[string]any{"qps": 1000, "burst": 2000},
			}
			return configArgs(kubeconfig, file, cfg, e.opts.JobSetArgs)
		},
		healthPath:  "/readyz",
		webhookPort: 2,
		webhooks:    "jobset/webhook.yaml",
		prefix:      "jobset-",
		probe:       e.probeJobSetWebhooks,
	}
}

var jobSets = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// probeJobSetWebhooks dry-run creates two JobSets: one JobSet's mutating
// webhook gives its pods' restartPolicy OnFailure, one its validating
// webhook denies (a success policy naming a replicated job it lacks).
func (e *Env) probeJobSetWebhooks(ctx context.Context) error {
	js := func(success map[string]any) *unstructured.Unstructured {
		spec := map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "w",
			"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/pause:3.10"}}}}}},
		}}}
		if success != nil {
			spec["successPolicy"] = success
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
			"metadata": map[string]any{"name": "kubeenv-webhook-probe", "namespace": "default"}, "spec": spec}}
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	got, err := e.dyn.Resource(jobSets).Namespace("default").Create(ctx, js(nil), dry)
	if err != nil {
		return err
	}
	jobs, _, _ := unstructured.NestedSlice(got.Object, "spec", "replicatedJobs")
	var restart string
	if len(jobs) == 1 {
		restart, _, _ = unstructured.NestedString(jobs[0].(map[string]any), "template", "spec", "template", "spec", "restartPolicy")
	}
	if restart != "OnFailure" {
		return fmt.Errorf("mutating webhook not called: a JobSet's pods got restartPolicy %q", restart)
	}
	_, err = e.dyn.Resource(jobSets).Namespace("default").Create(ctx,
		js(map[string]any{"operator": "All", "targetReplicatedJobs": []any{"nope"}}), dry)
	if err == nil || !strings.Contains(err.Error(), "vjobset.kb.io") {
		return fmt.Errorf("validating webhook not called: a JobSet with a bad success policy got %v", err)
	}
	return nil
}

func (e *Env) kuberayAddon(bin string) *addon {
	kubeconfig := filepath.Join(e.dir, "admin.kubeconfig")
	return &addon{
		name:  "kuberay-operator",
		path:  bin,
		nport: 2,
		args: func(ports []int) ([]string, error) {
			return append([]string{
				"--kubeconfig=" + kubeconfig,
				"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
				"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[1]),
				"--enable-leader-election=false",
				"--qps=1000",
				"--burst=2000",
				"--log-stdout-encoder=console",
			}, e.opts.KubeRayArgs...), nil
		},
		healthPath:  "/readyz",
		webhookPort: -1, // KubeRay's webhooks are off unless ENABLE_WEBHOOKS=true
	}
}

// StopKueue stops Kueue's manager only (SIGTERM, as a rollout would);
// its webhook configurations stay, so meanwhile the API server refuses
// what they match, as in a real cluster whose Kueue is down.
func (e *Env) StopKueue() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kueue == nil {
		return errors.New("kubeenv: Kueue is not part of this Env (Options.Kueue)")
	}
	if e.kueueProc == nil {
		return nil
	}
	err := e.kueueProc.stop()
	e.kueueProc = nil
	return err
}

// StartKueue starts Kueue's manager again after StopKueue, with the same
// configuration, ports and certificates, and waits until it is ready and
// the API server calls its webhooks again.
func (e *Env) StartKueue() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("kubeenv: Env is closed")
	}
	if e.kueue == nil {
		return errors.New("kubeenv: Kueue is not part of this Env (Options.Kueue)")
	}
	if e.kueueProc != nil && !e.kueueProc.exited() {
		return errors.New("kubeenv: Kueue is already running")
	}
	p, err := e.startAddon(e.kueue, false)
	if err != nil {
		return err
	}
	e.kueueProc = p
	return nil
}

// stopAddonsLocked stops Kueue, JobSet and KubeRay, all at once.
func (e *Env) stopAddonsLocked() error {
	procs := e.addons
	if e.kueueProc != nil {
		procs = append(procs, e.kueueProc)
	}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	e.addons, e.kueueProc = nil, nil
	return errors.Join(errs...)
}

// freePorts picks n distinct free loopback ports (see freePort).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
