// Package kubeenv runs a real etcd and kube-apiserver on loopback for
// integration tests. By default nothing else of a cluster runs (no kubelet,
// controller-manager or scheduler; see package kubelet for a stand-in);
// Options.MiniCluster (or StartMiniClusterT) adds kube-controller-manager,
// kube-scheduler and kwok's simulated kubelets, so that Jobs, Deployments
// and the scheduler work as in a real cluster (see minicluster.go for what
// kwok does with nodes and pods, and the annotations tests steer it with);
// Options.Kueue, JobSet and KubeRay add those controllers (addons.go).
//
// The binaries come from scripts/ensure-kube.sh (which `make test` runs).
// Tests that use this package fail, never skip, when they are missing.
//
// Without the mini cluster, because nothing else runs: pods must be created bound (spec.nodeName) as
// the scheduler would have bound them; no service accounts are created, so
// the ServiceAccount admission plugin is off; a deleted namespace stays
// Terminating forever (the namespace controller would empty it); garbage
// collection of owned objects does not happen.
//
// A package whose tests share one Env starts it in TestMain:
//
//	var env *kubeenv.Env
//
//	func TestMain(m *testing.M) {
//		var err error
//		if env, err = kubeenv.Start(kubeenv.Options{}); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		env.Close()
//		os.Exit(code)
//	}
//
// Tests sharing an Env should each work in their own namespace. A test of
// its own starts a mini cluster with
//
//	env := kubeenv.StartMiniClusterT(t)
//	env.Client().CoreV1().Nodes().Create(ctx, kubeenv.FakeNode("gpu-dp-1",
//		corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}), metav1.CreateOptions{})
package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ReadyTimeout bounds how long Start and StartAPIServer wait for each
// component. kube-apiserver needs 5-15 s on two cores, more under -race
// builds of the tests competing for the CPU.
const ReadyTimeout = 60 * time.Second

// Options configure Start. The zero value is fine.
type Options struct {
	// Log receives every component's output, each line prefixed by its
	// name ("etcd: ", "kube-apiserver: ", "kwok: ", ...). Default: a
	// <name>.log per component in Dir (gone after Close when Dir is
	// temporary; startup errors quote their tail either way).
	Log io.Writer
	// Dir holds etcd's data, the certificates and keys and the logs.
	// Default: a new temporary directory, removed by Close. A Dir given here
	// is left in place and must not hold a previous Env's data.
	Dir string
	// APIServerArgs are appended to kube-apiserver's flags (later flags win),
	// e.g. "--feature-gates=...".
	APIServerArgs []string

	// MiniCluster also starts kube-controller-manager, kube-scheduler and
	// kwok once the API server is ready, and waits until each says it is
	// healthy (a few seconds). StopAPIServer leaves them running, as a
	// control-plane outage leaves kubelets and controllers running: they
	// retry and catch up once StartAPIServer brings the server back. Close
	// stops them.
	MiniCluster bool
	// ControllerManagerArgs, SchedulerArgs and KwokArgs are appended to the
	// mini cluster's components' flags, e.g.
	// "--node-monitor-grace-period=10s".
	ControllerManagerArgs, SchedulerArgs, KwokArgs []string

	// Kueue, if set, also runs Kueue's manager, configured as it says, with
	// its CRDs, the ProvisioningRequest CRD and the CRDs of the
	// integrations it is given; JobSet runs JobSet's controller and KubeRay
	// KubeRay's operator, with their CRDs. They need MiniCluster; see
	// addons.go for how they run. Start waits until each is ready and the
	// API server calls its webhooks. On 2 cores Start takes about 4 s
	// with the mini cluster alone, 7 s with Kueue for batch/job only, 16 s
	// with Kueue's default integrations (their CRDs), 23-25 s with all
	// three: mostly the API server taking in KubeRay's CRDs. StopKueue and
	// StartKueue restart Kueue's manager.
	Kueue   *KueueOptions
	JobSet  bool
	KubeRay bool
	// JobSetArgs and KubeRayArgs are appended to those controllers' flags.
	JobSetArgs, KubeRayArgs []string
}

// Env is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Env struct {
	dir     string
	ownDir  bool
	opts    Options
	shared  *lockedWriter
	apiPath string
	sec     *secrets
	etcdURL string
	port    int // kube-apiserver's secure port, kept across restarts
	cfg     *rest.Config
	client  kubernetes.Interface
	dyn     dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	http    *http.Client // for /readyz

	manifests string // KueueManifestsDir, if Kueue, JobSet or KubeRay run
	kueue     *addon // Kueue's manager, its ports and configuration

	mu        sync.Mutex
	etcd      *proc
	apiserver *proc
	mini      []*proc // the mini cluster's components, once ready
	kueueProc *proc   // Kueue's manager, while it runs
	addons    []*proc // JobSet's controller, KubeRay's operator
	closed    bool
}

// Start starts etcd and kube-apiserver and waits until the apiserver's
// /readyz says ok, then the mini cluster if asked. On error nothing is left
// running.
func Start(opts Options) (_ *Env, err error) {
	apiPath, err := APIServerPath()
	if err != nil {
		return nil, err
	}
	etcdBin, err := etcdPath()
	if err != nil {
		return nil, err
	}
	var mini miniBinaries
	if opts.MiniCluster {
		if mini, err = findMiniBinaries(); err != nil {
			return nil, err
		}
	}
	addons, err := findAddonBinaries(opts)
	if err != nil {
		return nil, err
	}
	e := &Env{opts: opts, apiPath: apiPath, dir: opts.Dir}
	if opts.Log != nil {
		e.shared = &lockedWriter{w: opts.Log}
	}
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "kubeenv-"); err != nil {
			return nil, err
		}
		e.ownDir = true
	} else if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.sec, err = generateSecrets(e.dir); err != nil {
		return nil, err
	}
	if err := e.startEtcd(etcdBin); err != nil {
		return nil, err
	}

	// Retry with fresh ports if one was taken between freePort and bind.
	for attempt := 0; ; attempt++ {
		if e.port, err = freePort(); err != nil {
			return nil, err
		}
		e.setupClient()
		err = e.StartAPIServer()
		if err == nil {
			break
		}
		e.mu.Lock()
		retry := attempt < 3 && e.apiserver != nil && e.apiserver.addrInUse()
		e.apiserver = nil
		e.mu.Unlock()
		if !retry {
			return nil, err
		}
	}
	if opts.MiniCluster {
		// Kueue's, JobSet's and KubeRay's CRDs meanwhile, if asked.
		var prepared error
		var wg sync.WaitGroup
		wg.Go(func() { prepared = e.prepareAddons(addons) })
		err := e.startMiniCluster(mini)
		wg.Wait()
		if err := errors.Join(err, prepared); err != nil {
			return nil, err
		}
	}
	if err := e.startAddons(addons); err != nil {
		return nil, err
	}
	return e, nil
}

// StartT starts an Env for one test and closes it when the test ends. It
// fails the test (never skips) if the Env cannot start.
func StartT(t testing.TB) *Env {
	t.Helper()
	return StartTWith(t, Options{})
}

// StartMiniClusterT is StartT with the mini cluster
// (Options{MiniCluster: true}).
func StartMiniClusterT(t testing.TB) *Env {
	t.Helper()
	return StartTWith(t, Options{MiniCluster: true})
}

// StartTWith is StartT with options. A failed test logs the end of each
// component's log.
func StartTWith(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	e.LogOnFailure(t)
	return e
}

// LogOnFailure logs the end of each component's log when t ends failed
// (StartTWith does it for the test it starts the Env for; a test sharing
// an Env started in TestMain calls it).
func (e *Env) LogOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		procs := append(append([]*proc{e.apiserver, e.kueueProc}, e.mini...), e.addons...)
		for _, p := range procs {
			if p != nil {
				t.Logf("%s:%s", p.name, p.tail.report())
			}
		}
	})
}

func (e *Env) output(name string) (io.Writer, io.Closer, error) {
	if e.shared != nil {
		return &prefixWriter{prefix: name + ": ", shared: e.shared}, nil, nil
	}
	f, err := openLog(filepath.Join(e.dir, name+".log"))
	return f, f, err
}

func (e *Env) startEtcd(bin string) error {
	for attempt := 0; ; attempt++ {
		client, err := freePort()
		if err != nil {
			return err
		}
		peer, err := freePort()
		if err != nil {
			return err
		}
		e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		out, closer, err := e.output("etcd")
		if err != nil {
			return err
		}
		p, err := startProc("etcd", bin, []string{
			"--name=kubeenv",
			"--data-dir=" + filepath.Join(e.dir, "etcd"),
			"--listen-client-urls=" + e.etcdURL,
			"--advertise-client-urls=" + e.etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=kubeenv=" + peerURL,
			// Test data need not survive a power cut; fsync dominates write
			// latency on slow disks. 3.4.23 accepts the flag although its
			// --help does not list it.
			"--unsafe-no-fsync",
			"--logger=zap", // the 3.4 default, capnslog, warns it is deprecated
		}, out, closer)
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.etcd = p
		e.mu.Unlock()
		err = p.waitReady(ReadyTimeout, func(ctx context.Context) error {
			return expect(ctx, http.DefaultClient, e.etcdURL+"/health", `"health":"true"`)
		})
		if err == nil || attempt >= 3 || !p.addrInUse() {
			return err
		}
	}
}

func (e *Env) setupClient() {
	host := "https://127.0.0.1:" + strconv.Itoa(e.port)
	e.cfg = &rest.Config{
		Host:            host,
		BearerToken:     e.sec.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.sec.caPEM},
		// Tests create objects in bulk; client-side throttling (default
		// 5 QPS) would measure the client, not the code under test.
		QPS:   1000,
		Burst: 2000,
		// Protobuf, as kubelets and controllers speak to the API server.
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"},
	}
	e.client = kubernetes.NewForConfigOrDie(e.cfg)
	e.dyn = dynamic.NewForConfigOrDie(e.cfg)
	e.mapper = newMapper(e.client.Discovery())
	rt, err := rest.TransportFor(e.cfg)
	if err != nil {
		panic(err) // only fails on malformed TLS data, which we generated
	}
	e.http = &http.Client{Transport: rt}
}

func (e *Env) apiserverArgs() []string {
	args := []string{
		"--etcd-servers=" + e.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.port),
		// Without it kube-apiserver looks for a non-loopback host address,
		// which a sandbox without a default route does not have.
		"--advertise-address=127.0.0.1",
		// The "kubernetes" service's Endpoints may not hold a loopback
		// address; the reconciler would log an error every 10 s. (The
		// integration test server of k8s.io/kubernetes does the same.)
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(e.dir, "certs"), // unused, but keeps it out of /var/run/kubernetes
		"--tls-cert-file=" + e.sec.certFile,
		"--tls-private-key-file=" + e.sec.keyFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + e.sec.saKey,
		"--service-account-signing-key-file=" + e.sec.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--token-auth-file=" + e.sec.tokens,
		// No controller-manager creates the "default" service account, so
		// this plugin would reject every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
		// The watch cache stays on, as in every real cluster: the etcd of
		// tools/etcd (3.5 or later) answers its progress requests.
	}
	return append(args, e.opts.APIServerArgs...)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same port with the same certificates and keys, so clients and kubeconfigs
// handed out before keep working; it waits until /readyz is ok.
func (e *Env) StartAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("kubeenv: Env is closed")
	}
	if e.apiserver != nil && !e.apiserver.exited() {
		return errors.New("kubeenv: kube-apiserver is already running")
	}
	out, closer, err := e.output("kube-apiserver")
	if err != nil {
		return err
	}
	p, err := startProc("kube-apiserver", e.apiPath, e.apiserverArgs(), out, closer)
	if err != nil {
		return err
	}
	e.apiserver = p
	// Waiting under the lock keeps a concurrent Stop/Close from racing
	// the startup; they wait at most ReadyTimeout.
	err = p.waitReady(ReadyTimeout, func(ctx context.Context) error {
		return expect(ctx, e.http, e.cfg.Host+"/readyz", "ok")
	})
	if err != nil {
		p.stop()
	}
	return err
}

// StopAPIServer stops kube-apiserver only; etcd and its data stay, so
// StartAPIServer brings back the same cluster. Clients see connection
// errors meanwhile, as during a control-plane outage.
func (e *Env) StopAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.apiserver == nil {
		return nil
	}
	err := e.apiserver.stop()
	e.apiserver = nil
	return err
}

// Close stops every component and removes the temporary directory. It is
// idempotent.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	// Kueue, JobSet, KubeRay, then the mini cluster: they would otherwise
	// log connection errors while the API server drains.
	errs := []error{e.stopAddonsLocked(), e.stopMiniLocked()}
	// kube-apiserver first: it would otherwise log etcd errors while it drains.
	for _, p := range []*proc{e.apiserver, e.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	e.apiserver, e.etcd = nil, nil
	if e.ownDir {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// RESTConfig returns a copy of the admin client configuration.
func (e *Env) RESTConfig() *rest.Config { return rest.CopyConfig(e.cfg) }

// Client returns a clientset authenticated as the admin (system:masters).
func (e *Env) Client() kubernetes.Interface { return e.client }

// Dir returns the directory holding data, certificates and logs.
func (e *Env) Dir() string { return e.dir }

// EtcdURL returns etcd's client URL (plain HTTP on loopback).
func (e *Env) EtcdURL() string { return e.etcdURL }

// Kubeconfig returns a self-contained kubeconfig for the admin user: the
// CA data, the server URL and the static bearer token, i.e. what an operator
// would hand over to attach this cluster.
func (e *Env) Kubeconfig() []byte {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubeenv": {Server: e.cfg.Host, CertificateAuthorityData: e.sec.caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: e.sec.token}},
		Contexts:       map[string]*clientcmdapi.Context{"kubeenv": {Cluster: "kubeenv", AuthInfo: "admin", Namespace: "default"}},
		CurrentContext: "kubeenv",
	}
	b, err := clientcmd.Write(cfg)
	if err != nil {
		panic(err) // marshalling a fixed structure cannot fail
	}
	return b
}

// ServiceAccountKubeconfig returns a self-contained kubeconfig for the
// service account namespace/name, creating the account if it is missing,
// with a token from the TokenRequest API (an hour long): what an operator
// makes for sparecap as docs/kubernetes.md says. What the account may do
// is up to the roles bound to it.
func (e *Env) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) ([]byte, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := e.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	hour := int64(3600)
	tok, err := e.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubeenv": {Server: e.cfg.Host, CertificateAuthorityData: e.sec.caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: tok.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"kubeenv": {Cluster: "kubeenv", AuthInfo: name}},
		CurrentContext: "kubeenv",
	}
	return clientcmd.Write(cfg)
}

// expect GETs url and wants status 200 and a body containing want.
func expect(ctx context.Context, c *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
