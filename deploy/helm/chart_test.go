package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/sparecap/sparecap/internal/fleet"
)

const postgresURL = "postgres://sparecap:pw@db.example:5432/sparecap?sslmode=require"

// A chartCase is one value set: it is linted, rendered, checked, validated
// with kubeconform and applied to the test API server (server-side
// dry-run, strict field validation).
type chartCase struct {
	name   string
	values string   // a values file (YAML)
	set    []string // --set flags, after the file
	// kinds are the objects expected, as "Kind/name", in any order.
	kinds []string
	check func(t *testing.T, r *rendered)
}

// The objects every value set with chart-made secrets renders.
var baseKinds = []string{
	"Deployment/" + fullname,
	"Service/" + fullname,
	"ServiceAccount/" + fullname,
	"PodDisruptionBudget/" + fullname,
	"Secret/" + fullname + "-postgres",
	"Secret/" + fullname + "-secret-key",
	"Secret/" + fullname + "-admin-token",
}

func chartCases() []chartCase {
	return []chartCase{
		{
			name:   "defaults",
			values: "postgres:\n  url: " + postgresURL + "\n",
			kinds:  baseKinds,
			check:  checkDefaults,
		},
		{
			name: "existing-secrets",
			values: `
postgres:
  existingSecret: pg
  secretKey: dsn
secretKey:
  existingSecret: sealing
  secretKey: key.bin
adminToken:
  existingSecret: admin
  secretKey: admin-token
`,
			kinds: without(baseKinds, "Secret/"),
			check: func(t *testing.T, r *rendered) {
				c := r.container(t)
				wantSecretEnv(t, c, "SPARECAP_DB", "pg", "dsn")
				wantSecretEnv(t, c, "SPARECAP_ADMIN_TOKEN", "admin", "admin-token")
				v := volume(t, r.deployment(t), "secret-key")
				if v.Secret == nil || v.Secret.SecretName != "sealing" ||
					!slices.Equal(v.Secret.Items, []corev1.KeyToPath{{Key: "key.bin", Path: "secret.key"}}) {
					t.Errorf("secret-key volume = %+v; want Secret sealing, key key.bin as secret.key", v.VolumeSource)
				}
				if !slices.Contains(c.Args, "--secret-key-file=/etc/sparecap/secret-key/secret.key") {
					t.Errorf("args %q lack the secret key file", c.Args)
				}
			},
		},
		{
			name: "given-token-and-servicemonitor",
			values: `
postgres:
  url: ` + postgresURL + `
adminToken:
  value: sc_given_0123456789abcdef0123456789abcdef
serviceMonitor:
  enabled: true
  labels:
    release: prometheus
  interval: 15s
  scrapeTimeout: 10s
metrics:
  tokenSecret: scrape
trustedProxies: [10.0.0.0/8, 192.0.2.1]
webhookAllowCIDRs: [10.20.0.0/16, "fd00::/8"]
`,
			kinds: append(slices.Clone(baseKinds), "ServiceMonitor/"+fullname),
			check: func(t *testing.T, r *rendered) {
				if got := r.secretData(t, fullname+"-admin-token", "token"); got != "sc_given_0123456789abcdef0123456789abcdef" {
					t.Errorf("admin token = %q; want the given one", got)
				}
				if _, kept := r.get(t, "Secret", fullname+"-admin-token").GetAnnotations()["helm.sh/resource-policy"]; kept {
					t.Error("a given admin token's Secret is kept on uninstall; only generated ones should be")
				}
				c := r.container(t)
				wantSecretEnv(t, c, "SPARECAP_METRICS_TOKEN", "scrape", "token")
				if !slices.Contains(c.Args, "--trusted-proxies=10.0.0.0/8,192.0.2.1") {
					t.Errorf("args %q lack the trusted proxies", c.Args)
				}
				if !slices.Contains(c.Args, "--webhook-allow-cidr=10.20.0.0/16") || !slices.Contains(c.Args, "--webhook-allow-cidr=fd00::/8") {
					t.Errorf("args %q lack the webhook allow-list", c.Args)
				}
				sm := r.get(t, "ServiceMonitor", fullname)
				if sm.GetLabels()["release"] != "prometheus" {
					t.Errorf("ServiceMonitor labels %v lack release=prometheus", sm.GetLabels())
				}
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				want := map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s", "scrapeTimeout": "10s",
					"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scrape", "key": "token"}}}
				if len(eps) != 1 || fmt.Sprint(eps[0]) != fmt.Sprint(want) {
					t.Errorf("ServiceMonitor endpoints = %v; want [%v]", eps, want)
				}
				sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				svc := r.service(t)
				for k, v := range sel {
					if svc.Labels[k] != v {
						t.Errorf("ServiceMonitor selects %s=%s; the Service has %v", k, v, svc.Labels)
					}
				}
				ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
				if !slices.Equal(ns, []string{r.namespace}) {
					t.Errorf("ServiceMonitor namespaces = %q; want [%s]", ns, r.namespace)
				}
			},
		},
		{
			name:   "pdb-min-available",
			values: "postgres:\n  url: " + postgresURL + "\npodDisruptionBudget:\n  minAvailable: 2\n",
			kinds:  baseKinds,
			check: func(t *testing.T, r *rendered) {
				pdb := r.pdb(t)
				if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(2) || pdb.Spec.MaxUnavailable != nil {
					t.Errorf("PDB spec = minAvailable %v, maxUnavailable %v; want minAvailable 2 only", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
				}
			},
		},
		{
			name:   "one-replica-pdb-percentage",
			values: "postgres:\n  url: " + postgresURL + "\n",
			// A CPU limit given as a number, not a string.
			set:   []string{"replicaCount=1", "podDisruptionBudget.maxUnavailable=50%", "resources.limits.cpu=2"},
			kinds: baseKinds,
			check: func(t *testing.T, r *rendered) {
				if d := r.deployment(t); d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
					t.Errorf("replicas = %v; want 1", d.Spec.Replicas)
				}
				if q := r.container(t).Resources.Limits[corev1.ResourceCPU]; q.String() != "2" {
					t.Errorf("CPU limit = %s; want 2", q.String())
				}
				pdb := r.pdb(t)
				if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromString("50%") || pdb.Spec.MinAvailable != nil {
					t.Errorf("PDB spec = minAvailable %v, maxUnavailable %v; want maxUnavailable 50%% only", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
				}
			},
		},
		{
			name: "metrics-on-the-api-port",
			values: `
postgres:
  url: ` + postgresURL + `
metrics:
  port: 0
serviceMonitor:
  enabled: true
`,
			kinds: append(slices.Clone(baseKinds), "ServiceMonitor/"+fullname),
			check: func(t *testing.T, r *rendered) {
				c := r.container(t)
				if len(c.Ports) != 1 || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--metrics-addr") }) {
					t.Errorf("ports %+v, args %q: want /metrics on the API's port", c.Ports, c.Args)
				}
				if len(r.service(t).Spec.Ports) != 1 {
					t.Errorf("Service ports %+v; want the API's alone", r.service(t).Spec.Ports)
				}
				eps, _, _ := unstructured.NestedSlice(r.get(t, "ServiceMonitor", fullname).Object, "spec", "endpoints")
				if len(eps) != 1 || eps[0].(map[string]any)["port"] != "http" {
					t.Errorf("ServiceMonitor endpoints %v; want port http", eps)
				}
			},
		},
		{
			name: "fleet-file",
			values: `
postgres:
  url: ` + postgresURL + `
fleet: |
  pools:
    - region: us-east-1          # a comment survives
      gpu_type: H100_SXM
      machines: 4
    - region: us-east-1
      gpu_type: H100_SXM
      machines: 2
      reserved_for: acme
  prices:
    H100_SXM: "2.99"
`,
			kinds: append(slices.Clone(baseKinds), "ConfigMap/"+fullname+"-fleet"),
			check: func(t *testing.T, r *rendered) {
				var cm corev1.ConfigMap
				r.decode(t, "ConfigMap", fullname+"-fleet", &cm)
				f, err := fleet.Parse([]byte(cm.Data["fleet.yaml"]))
				if err != nil {
					t.Fatalf("the ConfigMap's fleet.yaml does not parse as a fleet file: %v\n%s", err, cm.Data["fleet.yaml"])
				}
				if len(f.Pools) != 2 || f.Pools[1].ReservedFor != "acme" {
					t.Errorf("fleet pools = %+v; want the two of the values", f.Pools)
				}
				d := r.deployment(t)
				c := r.container(t)
				if !slices.Contains(c.Args, "--fleet=/etc/sparecap/fleet/fleet.yaml") {
					t.Errorf("args %q lack --fleet", c.Args)
				}
				if v := volume(t, d, "fleet"); v.ConfigMap == nil || v.ConfigMap.Name != fullname+"-fleet" {
					t.Errorf("fleet volume = %+v; want the ConfigMap", v.VolumeSource)
				}
				wantMount(t, c, "fleet", "/etc/sparecap/fleet", true)
				if d.Spec.Template.Annotations["checksum/fleet"] == "" {
					t.Error("no checksum/fleet annotation: a new fleet file would not roll the pods")
				}
			},
		},
		{
			name: "extras-and-ingress",
			values: `
postgres:
  url: ` + postgresURL + `
fullnameOverride: rel-sparecap
image:
  repository: registry.example.com/sparecap
  digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
imagePullSecrets:
  - name: regcred
extraArgs:
  - --drain-window=10m
  - --machine-provider=register
  - --node-label=team=ml
extraEnv:
  - name: TZ
    value: UTC
extraVolumes:
  - name: hooks
    emptyDir: {}
extraVolumeMounts:
  - name: hooks
    mountPath: /opt/hooks
    readOnly: true
podAnnotations:
  example.com/team: ml
podLabels:
  team: ml
nodeSelector:
  kubernetes.io/os: linux
tolerations:
  - key: dedicated
    operator: Equal
    value: control-plane
    effect: NoSchedule
serviceAccount:
  annotations:
    example.com/role: sparecap
service:
  annotations:
    example.com/lb: internal
ingress:
  enabled: true
  className: nginx
  annotations:
    nginx.ingress.kubernetes.io/proxy-buffering: "off"
  hosts:
    - host: sparecap.example.com
      paths:
        - path: /
          pathType: Prefix
  tls:
    - secretName: sparecap-tls
      hosts: [sparecap.example.com]
`,
			kinds: append(slices.Clone(baseKinds), "Ingress/"+fullname),
			check: func(t *testing.T, r *rendered) {
				c := r.container(t)
				if n := len(c.Args); n < 3 || !slices.Equal(c.Args[n-3:], []string{"--drain-window=10m", "--machine-provider=register", "--node-label=team=ml"}) {
					t.Errorf("args %q do not end with the extra args", c.Args)
				}
				if c.Image != "registry.example.com/sparecap@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
					t.Errorf("image = %q; want the digest", c.Image)
				}
				if !slices.Contains(c.Env, corev1.EnvVar{Name: "TZ", Value: "UTC"}) {
					t.Errorf("env %v lacks TZ", c.Env)
				}
				wantMount(t, c, "hooks", "/opt/hooks", true)
				d := r.deployment(t)
				if d.Spec.Template.Labels["team"] != "ml" || d.Spec.Template.Annotations["example.com/team"] != "ml" {
					t.Errorf("pod labels %v, annotations %v lack the extra ones", d.Spec.Template.Labels, d.Spec.Template.Annotations)
				}
				if len(d.Spec.Template.Spec.Tolerations) != 1 || d.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
					t.Errorf("tolerations %v, nodeSelector %v", d.Spec.Template.Spec.Tolerations, d.Spec.Template.Spec.NodeSelector)
				}
				var ing networkingv1.Ingress
				r.decode(t, "Ingress", fullname, &ing)
				if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 || len(ing.Spec.Rules) != 1 {
					t.Fatalf("Ingress spec = %+v", ing.Spec)
				}
				rule := ing.Spec.Rules[0]
				if rule.Host != "sparecap.example.com" || rule.HTTP == nil || len(rule.HTTP.Paths) != 1 {
					t.Fatalf("Ingress rule = %+v", rule)
				}
				be := rule.HTTP.Paths[0].Backend.Service
				if be == nil || be.Name != fullname || be.Port.Name != "http" {
					t.Errorf("Ingress backend = %+v; want service %s port http", be, fullname)
				}
			},
		},
	}
}

// TestChart lints, renders, checks and validates every value set.
func TestChart(t *testing.T) {
	kv := kubeVersion(t)
	for i, c := range chartCases() {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-f", valuesFile(t, c.values), "--kube-version", kv}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			if out, _, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			ns := fmt.Sprintf("chart-%d-%s", i, c.name)
			r := render(t, ns, args...)
			if got := r.kinds(); !sameSet(got, c.kinds) {
				t.Errorf("objects = %q; want %q", got, c.kinds)
			}
			checkCommon(t, r)
			if c.check != nil {
				c.check(t, r)
			}
			kubeconform(t, r)
			dryRunApply(t, r)
		})
	}
}

// checkDefaults checks the default value set: the Deployment as the chart's
// README describes it, and the Secrets the chart makes.
func checkDefaults(t *testing.T, r *rendered) {
	d := r.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %v; want 3", d.Spec.Replicas)
	}
	c := r.container(t)
	wantArgs := []string{"server", "--addr=0.0.0.0:8407", "--db=$(SPARECAP_DB)", "--data-dir=/var/lib/sparecap",
		"--secret-key-file=/etc/sparecap/secret-key/secret.key", "--advertise-url=http://$(POD_IP):8407", "--metrics-addr=0.0.0.0:9407"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q; want %q", c.Args, wantArgs)
	}
	// Followers forward writes to the leader at the address it advertises:
	// its pod IP, from the downward API.
	podIP := false
	for _, e := range c.Env {
		if e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			podIP = true
		}
	}
	if !podIP {
		t.Errorf("env has no POD_IP from status.podIP for --advertise-url: %+v", c.Env)
	}
	if c.Image != "sparecap:0.1.0" {
		t.Errorf("image = %q; want sparecap:<appVersion>", c.Image)
	}
	wantSecretEnv(t, c, "SPARECAP_DB", fullname+"-postgres", "url")
	wantSecretEnv(t, c, "SPARECAP_ADMIN_TOKEN", fullname+"-admin-token", "token")
	if got := r.secretData(t, fullname+"-postgres", "url"); got != postgresURL {
		t.Errorf("postgres Secret holds %q; want %q", got, postgresURL)
	}
	if got := r.secretData(t, fullname+"-secret-key", "secret.key"); len(got) != 32 {
		t.Errorf("the generated secret key is %d bytes; want 32", len(got))
	}
	if got := r.secretData(t, fullname+"-admin-token", "token"); !strings.HasPrefix(got, "sc_") || len(got) < 40 {
		t.Errorf("generated admin token %q: want sc_ and at least 37 random characters", got)
	}
	for _, name := range []string{fullname + "-secret-key", fullname + "-admin-token"} {
		if r.get(t, "Secret", name).GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("generated Secret %s is not kept on uninstall (helm.sh/resource-policy: keep)", name)
		}
	}
	res := c.Resources
	for name, want := range map[string]string{"requests.cpu": "100m", "requests.memory": "128Mi", "limits.cpu": "1", "limits.memory": "512Mi"} {
		list := res.Requests
		if strings.HasPrefix(name, "limits.") {
			list = res.Limits
		}
		q := list[corev1.ResourceName(name[strings.Index(name, ".")+1:])]
		if q.String() != want {
			t.Errorf("resources %s = %s; want %s", name, q.String(), want)
		}
	}
	anti := d.Spec.Template.Spec.Affinity
	if anti == nil || anti.PodAntiAffinity == nil || len(anti.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		len(anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Fatalf("affinity = %+v; want one preferred podAntiAffinity term", anti)
	}
	term := anti.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil || !subset(term.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("anti-affinity term = %+v; want hostname, selecting the pods", term)
	}
	pdb := r.pdb(t)
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB spec = minAvailable %v, maxUnavailable %v; want maxUnavailable 1 only", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	svc := r.service(t)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 2 {
		t.Fatalf("Service spec = %+v; want ClusterIP with two ports", svc.Spec)
	}
	if p := svc.Spec.Ports[0]; p.Name != "http" || p.Port != 8407 || p.TargetPort != intstr.FromString("http") {
		t.Errorf("Service port = %+v; want http 8407 -> http", p)
	}
	// /metrics on a port of its own, which the Ingress does not route.
	if p := svc.Spec.Ports[1]; p.Name != "metrics" || p.Port != 9407 || p.TargetPort != intstr.FromString("metrics") {
		t.Errorf("Service port = %+v; want metrics 9407 -> metrics", p)
	}
}

// checkCommon checks what holds for every value set: labels, namespaces,
// and the Deployment's probes, security context, volumes and selectors.
func checkCommon(t *testing.T, r *rendered) {
	for _, o := range r.objects {
		if o.GetNamespace() != r.namespace {
			t.Errorf("%s/%s is in namespace %q; want %q", o.GetKind(), o.GetName(), o.GetNamespace(), r.namespace)
		}
		l := o.GetLabels()
		for k, v := range map[string]string{
			"app.kubernetes.io/name":       "sparecap",
			"app.kubernetes.io/instance":   release,
			"app.kubernetes.io/version":    "0.1.0",
			"app.kubernetes.io/managed-by": "Helm",
			"helm.sh/chart":                "sparecap-0.1.0",
		} {
			if l[k] != v {
				t.Errorf("%s/%s: label %s = %q; want %q", o.GetKind(), o.GetName(), k, l[k], v)
			}
		}
	}
	d := r.deployment(t)
	pod := d.Spec.Template
	if !subset(d.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, pod.Labels)
	}
	if !subset(r.service(t).Spec.Selector, pod.Labels) {
		t.Errorf("Service selector %v does not select the pods %v", r.service(t).Spec.Selector, pod.Labels)
	}
	if pdb := r.pdb(t); !subset(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("PDB selector %v does not select the pods %v", pdb.Spec.Selector.MatchLabels, pod.Labels)
	}
	spec := pod.Spec
	if spec.ServiceAccountName != fullname {
		t.Errorf("serviceAccountName = %q; want %q", spec.ServiceAccountName, fullname)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pods mount a ServiceAccount token; sparecap does not use one")
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("terminationGracePeriodSeconds = %v; want 30", spec.TerminationGracePeriodSeconds)
	}
	psc := spec.SecurityContext
	if psc == nil || !isTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v; want non-root 65532, seccomp RuntimeDefault", psc)
	}
	c := r.container(t)
	sc := c.SecurityContext
	if sc == nil || !isTrue(sc.RunAsNonRoot) || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		!isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext = %+v; want non-root 65532, read-only root, no escalation, drop ALL, RuntimeDefault", sc)
	}
	if len(c.Args) == 0 || c.Args[0] != "server" || !slices.Contains(c.Args, "--addr=0.0.0.0:8407") ||
		!slices.Contains(c.Args, "--db=$(SPARECAP_DB)") || !slices.Contains(c.Args, "--data-dir=/var/lib/sparecap") {
		t.Errorf("args = %q; want server --addr=0.0.0.0:8407 --db=$(SPARECAP_DB) --data-dir=/var/lib/sparecap ...", c.Args)
	}
	// Kubernetes expands --db=$(SPARECAP_DB) from the container's env.
	if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SPARECAP_DB" }); i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
		t.Errorf("env %v: SPARECAP_DB does not come from a Secret", c.Env)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "SPARECAP_CONFIG" && strings.HasPrefix(e.Value, "/var/lib/sparecap/")
	}) {
		t.Errorf("env %v: SPARECAP_CONFIG must point into the data volume (the root file system is read-only)", c.Env)
	}
	if len(c.Ports) < 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8407 {
		t.Errorf("ports = %+v; want http 8407 first", c.Ports)
	}
	// /metrics on its own port, unless metrics.port is 0.
	if len(c.Ports) == 2 && (c.Ports[1].Name != "metrics" || !slices.Contains(c.Args, fmt.Sprintf("--metrics-addr=0.0.0.0:%d", c.Ports[1].ContainerPort))) {
		t.Errorf("ports = %+v, args %q; want the metrics port served with --metrics-addr", c.Ports, c.Args)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe = %+v; want HTTP GET %s on port http", p.name, p.probe, p.path)
		}
	}
	if v := volume(t, d, "data"); v.EmptyDir == nil {
		t.Errorf("data volume = %+v; want an emptyDir", v.VolumeSource)
	}
	if v := volume(t, d, "secret-key"); v.Secret == nil {
		t.Errorf("secret-key volume = %+v; want a Secret", v.VolumeSource)
	}
	wantMount(t, c, "data", "/var/lib/sparecap", false)
	wantMount(t, c, "secret-key", "/etc/sparecap/secret-key", true)
}

// TestBadValues checks that helm refuses bad values with a message that
// names the problem, before anything is rendered.
func TestBadValues(t *testing.T) {
	kv := kubeVersion(t)
	pg := "postgres.url=" + postgresURL
	for _, c := range []struct {
		name string
		args []string
		want []string // substrings of helm's error
	}{
		{"no-postgres", nil, []string{"sparecap needs a PostgreSQL database", "postgres.url", "postgres.existingSecret"}},
		{"negative-replicas", []string{"--set", pg, "--set", "replicaCount=-1"}, []string{"/replicaCount", "minimum"}},
		{"string-replicas", []string{"--set", pg, "--set-string", "replicaCount=three"}, []string{"/replicaCount", "got string, want integer"}},
		{"string-port", []string{"--set", pg, "--set-string", "service.port=http"}, []string{"/service/port", "got string, want integer"}},
		{"unknown-key", []string{"--set", pg, "--set", "replicas=3"}, []string{"replicas", "not allowed"}},
		{"bad-percentage", []string{"--set", pg, "--set", "podDisruptionBudget.minAvailable=half"}, []string{"/podDisruptionBudget/minAvailable"}},
		{"not-postgres", []string{"--set", "postgres.url=mysql://db/sparecap"}, []string{"/postgres/url"}},
		{"string-metrics-port", []string{"--set", pg, "--set-string", "metrics.port=metrics"}, []string{"/metrics/port"}},
		{"bad-proxy", []string{"--set", pg, "--set", "trustedProxies={proxy.local}"}, []string{"/trustedProxies/0"}},
		{"bad-webhook-cidr", []string{"--set", pg, "--set", "webhookAllowCIDRs={intranet}"}, []string{"/webhookAllowCIDRs/0"}},
		{"short-admin-token", []string{"--set", pg, "--set", "adminToken.value=12345678"}, []string{"/adminToken/value"}},
		{"bad-interval", []string{"--set", pg, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.interval=soon"}, []string{"/serviceMonitor/interval"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, err := helm(t, append([]string{"template", release, chartDir, "--kube-version", kv}, c.args...)...)
			if err == nil {
				t.Fatalf("helm template accepted the values; rendered:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("helm's error does not mention %q:\n%s", w, stderr)
				}
			}
			t.Logf("refused as wanted: %s", strings.TrimSpace(stderr))
		})
	}
}

// rendered is the output of one helm template.
type rendered struct {
	namespace string
	docs      [][]byte // the YAML documents, as helm printed them
	objects   []*unstructured.Unstructured
}

// render runs helm template for namespace ns with args and parses every
// document.
func render(t *testing.T, ns string, args ...string) *rendered {
	t.Helper()
	out, _, err := helm(t, append([]string{"template", release, chartDir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{namespace: ns}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template's output does not parse: %v\n%s", err, out)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("a document does not parse: %v\n%s", err, doc)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // an empty document (comments only)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			t.Fatalf("a document is not a Kubernetes object: %v\n%s", err, doc)
		}
		r.docs = append(r.docs, doc)
		r.objects = append(r.objects, o)
	}
	if len(r.objects) == 0 {
		t.Fatalf("helm template rendered nothing:\n%s", out)
	}
	return r
}

func (r *rendered) kinds() []string {
	var ks []string
	for _, o := range r.objects {
		ks = append(ks, o.GetKind()+"/"+o.GetName())
	}
	return ks
}

func (r *rendered) get(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s among %q", kind, name, r.kinds())
	return nil
}

// decode converts the object into a typed one, failing on fields the type
// does not have.
func (r *rendered) decode(t testing.TB, kind, name string, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(r.get(t, kind, name).Object, into, true); err != nil {
		t.Fatalf("%s/%s: %v", kind, name, err)
	}
}

func (r *rendered) deployment(t testing.TB) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	r.decode(t, "Deployment", fullname, &d)
	return &d
}

func (r *rendered) container(t testing.TB) corev1.Container {
	t.Helper()
	cs := r.deployment(t).Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "sparecap" {
		t.Fatalf("containers = %+v; want one named sparecap", cs)
	}
	return cs[0]
}

func (r *rendered) service(t testing.TB) *corev1.Service {
	t.Helper()
	var s corev1.Service
	r.decode(t, "Service", fullname, &s)
	return &s
}

func (r *rendered) pdb(t testing.TB) *policyv1.PodDisruptionBudget {
	t.Helper()
	var p policyv1.PodDisruptionBudget
	r.decode(t, "PodDisruptionBudget", fullname, &p)
	return &p
}

// secretData returns the decoded value of key in the Secret.
func (r *rendered) secretData(t testing.TB, name, key string) string {
	t.Helper()
	var s corev1.Secret
	r.decode(t, "Secret", name, &s) // decodes data's base64
	v, ok := s.Data[key]
	if !ok {
		t.Fatalf("Secret %s has no key %s (keys: %v)", name, key, keys(s.Data))
	}
	return string(v)
}

func wantSecretEnv(t testing.TB, c corev1.Container, name, secret, key string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret || e.ValueFrom.SecretKeyRef.Key != key {
				t.Errorf("env %s = %+v; want Secret %s key %s", name, e, secret, key)
			}
			return
		}
	}
	t.Errorf("no env %s in %v", name, c.Env)
}

func wantMount(t testing.TB, c corev1.Container, name, path string, readOnly bool) {
	t.Helper()
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == name && m.MountPath == path && m.ReadOnly == readOnly
	}) {
		t.Errorf("volumeMounts %+v lack %s at %s (readOnly %v)", c.VolumeMounts, name, path, readOnly)
	}
}

func volume(t testing.TB, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s in %+v", name, d.Spec.Template.Spec.Volumes)
	return corev1.Volume{}
}

func without(list []string, prefix string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// subset reports whether every label of sel is in labels (and sel is not
// empty, which would select everything).
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
