package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/store"
)

// An operator attaches a cluster's Kubernetes API by giving sparecap a
// kubeconfig. It is checked (never by contacting the cluster), sealed with
// Options.Sealer bound to the cluster's ID and stored; no response ever
// contains it or the address of the API server it names.

// errNoAttach answers a project token that tries to attach (or, with verb
// "attach or detach", detach) what (a kubeconfig, a slurm.conf).
func errNoAttach(verb, what string) error {
	return &clientError{http.StatusForbidden, apiv1.CodeForbidden, "only an operator (admin token) may " + verb + " a " + what}
}

// errNoSealer answers an attach on a server started without a secret key.
func errNoSealer() error {
	return &clientError{http.StatusServiceUnavailable, apiv1.CodeUnavailable,
		"this server cannot store kubeconfigs: it was started without a secret key to seal them with"}
}

// checkKubeconfig parses a kubeconfig the way the Kubernetes driver will
// load it and makes sure its current context yields an API server address.
// Every problem is a 400 naming the field "kubeconfig". Paths to files
// (certificates, keys, token files) are refused: only the kubeconfig is
// stored, and the server must not read its own files on a caller's behalf.
// Unless allowPlugins, so are exec credential plugins, auth-providers and
// proxy-urls anywhere in the file (kube.CheckKubeconfig): they would run
// commands on the server, with its environment, or send the cluster's
// traffic elsewhere.
func checkKubeconfig(text string, allowPlugins bool) error {
	bad := func(format string, args ...any) error {
		return invalid("kubeconfig", "kubeconfig: "+format, args...)
	}
	if strings.TrimSpace(text) == "" {
		return bad("it is empty; send the kubeconfig file's YAML as a string")
	}
	cfg, err := clientcmd.Load([]byte(text))
	if err != nil {
		return bad("not a valid kubeconfig: %v", err)
	}
	if err := kube.CheckKubeconfig([]byte(text), allowPlugins); err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), kube.ErrKubeconfigPlugin.Error()+": "))
	}
	if cfg.CurrentContext == "" {
		return bad("it has no current-context; set one (kubectl config use-context NAME) or export just the one you need (kubectl config view --minify --flatten --raw)")
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || kctx == nil {
		return bad("its current-context %q is not one of its contexts (%s)", cfg.CurrentContext, keys(cfg.Contexts))
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return bad("context %q names cluster %q, which is not one of its clusters (%s)", cfg.CurrentContext, kctx.Cluster, keys(cfg.Clusters))
	}
	if strings.TrimSpace(cluster.Server) == "" {
		return bad("cluster %q has no server (the API server's address, https://HOST:PORT)", kctx.Cluster)
	}
	files := []struct{ what, path string }{{"certificate-authority of cluster " + kctx.Cluster, cluster.CertificateAuthority}}
	if user := cfg.AuthInfos[kctx.AuthInfo]; user != nil {
		files = append(files,
			struct{ what, path string }{"client-certificate of user " + kctx.AuthInfo, user.ClientCertificate},
			struct{ what, path string }{"client-key of user " + kctx.AuthInfo, user.ClientKey},
			struct{ what, path string }{"tokenFile of user " + kctx.AuthInfo, user.TokenFile})
	}
	for _, f := range files {
		if f.path != "" {
			return bad("its %s is a file path (%s); only the kubeconfig is stored, so embed the data instead (kubectl config view --minify --flatten --raw)", f.what, f.path)
		}
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), "invalid configuration: "))
	}
	if rc.Host == "" {
		return bad("it yields no API server address")
	}
	if _, err := apiServerURL(rc.Host); err != nil {
		return bad("%v", err)
	}
	return nil
}

// apiServerURL parses a rest.Config Host the way client-go does: a bare
// host:port means https.
func apiServerURL(host string) (*url.URL, error) {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("its server is not a valid URL: %v", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return nil, fmt.Errorf("its server %q is not an http(s)://HOST[:PORT] address", host)
	}
	return u, nil
}

func keys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "it has none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, fmt.Sprintf("%q", k))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkAttach checks that this server can store a kubeconfig and that
// text is one it accepts.
func (s *Server) checkAttach(text string) error {
	if s.Sealer == nil {
		return errNoSealer()
	}
	return checkKubeconfig(text, s.AllowKubeconfigPlugins)
}

// checkAccess asks the cluster what the kubeconfig's identity may do (see
// Options.CheckAccess): the access record to keep, or a 400 naming the
// essential permissions missing, or saying the cluster could not be
// asked. The API server's address is masked in the message.
func (s *Server) checkAccess(ctx context.Context, text string) (domain.Access, error) {
	if s.CheckAccess == nil {
		return domain.Access{}, nil
	}
	a, err := s.CheckAccess(ctx, []byte(text))
	if err == nil {
		return a, nil
	}
	msg := err.Error()
	if cfg, perr := clientcmd.Load([]byte(text)); perr == nil {
		for _, v := range serverAddresses(cfg) {
			msg = strings.ReplaceAll(msg, v, "[cluster API]")
		}
	}
	msg = urlRE.ReplaceAllString(msg, "[URL]")
	if !errors.Is(err, kube.ErrEssentialMissing) {
		msg += "; the cluster's API must answer for an attach to be checked"
	}
	return domain.Access{}, invalid("kubeconfig", "kubeconfig: %s", msg)
}

// storeAccess writes a checked attach's access record in tx and, when
// something is missing, the PermissionMissing event that says so.
func (s *Server) storeAccess(ctx context.Context, tx store.Tx, clusterID string, a domain.Access) error {
	if a.CheckedAt.IsZero() {
		return nil
	}
	if err := tx.SetAccess(ctx, clusterID, a); err != nil {
		return err
	}
	if len(a.Missing) == 0 {
		return nil
	}
	_, err := tx.AddEvent(ctx, domain.Event{ID: s.ctrl.NewID("ev-"), ClusterID: clusterID, Reason: domain.ReasonPermissionMissing,
		Message: domain.AccessMessage(a.Missing), Timestamp: s.clock.Now()})
	return err
}

// sealKubeconfig seals a checked kubeconfig for SetKubeconfig, bound to
// its cluster: it opens only for that cluster's ID.
func (s *Server) sealKubeconfig(clusterID, text string) ([]byte, error) {
	sealed, err := s.Sealer.Seal([]byte(text), clusterID)
	if err != nil {
		return nil, fmt.Errorf("seal kubeconfig: %w", err)
	}
	return sealed, nil
}

// setKubeconfig stores sealed (nil detaches) with the access its check
// found, and tells the driver layer.
func (s *Server) setKubeconfig(ctx context.Context, id string, sealed []byte, a domain.Access) error {
	return s.attach(ctx, id, func(tx store.Tx, now time.Time) error {
		if err := tx.SetKubeconfig(ctx, id, sealed, now); err != nil {
			return err
		}
		return s.storeAccess(ctx, tx, id, a)
	})
}

// attach runs write, which stores a cluster's sealed credentials, in one
// transaction, then tells the driver layer the cluster's access changed.
func (s *Server) attach(ctx context.Context, id string, write func(store.Tx, time.Time) error) error {
	now := s.clock.Now()
	err := s.store.Update(ctx, func(tx store.Tx) error { return write(tx, now) })
	if errors.Is(err, domain.ErrNotFound) {
		return notFound("cluster %q not found", id)
	}
	if err != nil {
		return err
	}
	if s.OnKubeconfig != nil {
		s.OnKubeconfig(id)
	}
	return nil
}

// attachAdmin runs h, which attaches or detaches what (a kubeconfig, a
// slurm.conf), for the admin token only; a project token gets a 403 that
// says who may.
func (s *Server) attachAdmin(what string, h handler) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, p principal) {
		if !p.admin {
			s.fail(w, r, errNoAttach("attach or detach", what))
			return
		}
		h(w, r, p)
	})
}

func (s *Server) attachKubeconfig(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c.Type == domain.ClusterSlurm {
		s.fail(w, r, invalid("cluster_type", "cluster %s is a SLURM cluster: it has no Kubernetes API; attach its slurm.conf (PUT /v1/admin/clusters/{id}/slurm)", c.ID))
		return
	}
	var req apiv1.AttachKubeconfigRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkAttach(req.Kubeconfig); err != nil {
		s.fail(w, r, err)
		return
	}
	access, err := s.checkAccess(ctx, req.Kubeconfig)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sealed, err := s.sealKubeconfig(c.ID, req.Kubeconfig)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.setKubeconfig(ctx, c.ID, sealed, access); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("kubeconfig attached", "cluster", c.ID)
	s.writeFreshCluster(w, r, c.ID)
}

func (s *Server) detachKubeconfig(w http.ResponseWriter, r *http.Request, p principal) {
	c, err := s.visibleCluster(r.Context(), r.PathValue("id"), p)
	s.detach(w, r, c, err, "kubeconfig")
}

// detach deletes cluster c's attachment (a kubeconfig or a slurm.conf:
// one column holds either), after err, the lookup of c.
func (s *Server) detach(w http.ResponseWriter, r *http.Request, c domain.Cluster, err error, what string) {
	if err == nil {
		err = decodeEmpty(r.Body)
	}
	if err == nil {
		err = s.setKubeconfig(r.Context(), c.ID, nil, domain.Access{})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info(what+" detached", "cluster", c.ID)
	s.writeFreshCluster(w, r, c.ID)
}

// writeFreshCluster reads the cluster again and writes it with status 200.
func (s *Server) writeFreshCluster(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.store.GetCluster(r.Context(), id)
	if errors.Is(err, domain.ErrNotFound) {
		err = notFound("cluster %q not found", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeCluster(w, r, http.StatusOK, c)
}

// urlRE finds http(s) URLs in error text.
// A URL does not end in punctuation that closes or ends a sentence.
var urlRE = regexp.MustCompile(`https?://[^\s"'<>()\[\]{}]*[^\s"'<>()\[\]{}.,;:!?]`)

// apiAddressRedactor returns a function that hides, in text shown to
// callers (a node's last error), the address of the cluster's API server:
// client-go errors name it ("Get \"https://10.0.0.7:6443/api/…\"", "dial
// tcp 10.0.0.7:6443: …"). The kubeconfig is opened only when there is
// text to redact. URLs are hidden in any case, for errors recorded while
// another kubeconfig was attached.
func (s *Server) apiAddressRedactor(ctx context.Context, c domain.Cluster) func(string) string {
	var secrets []string
	loaded := false
	return func(text string) string {
		if text == "" {
			return text
		}
		if !loaded {
			loaded = true
			secrets = s.apiAddresses(ctx, c)
		}
		for _, v := range secrets {
			text = strings.ReplaceAll(text, v, "[cluster API]")
		}
		return urlRE.ReplaceAllString(text, "[URL]")
	}
}

// apiAddresses returns the forms in which the cluster's API server
// address may appear in an error, longest first; none if no kubeconfig is
// attached or it cannot be read.
func (s *Server) apiAddresses(ctx context.Context, c domain.Cluster) []string {
	if c.KubeAttachedAt.IsZero() || s.Sealer == nil {
		return nil
	}
	sealed, err := s.store.GetKubeconfig(ctx, c.ID)
	if err != nil || sealed == nil {
		return nil
	}
	text, err := s.Sealer.Open(sealed, c.ID)
	if err != nil {
		s.log.Warn("cannot open a cluster's kubeconfig", "cluster", c.ID, "err", err)
		return nil
	}
	cfg, err := clientcmd.Load(text)
	if err != nil {
		return nil
	}
	return serverAddresses(cfg)
}

// serverAddresses lists every server of cfg as a URL, host:port and bare
// host, longest first.
func serverAddresses(cfg *clientcmdapi.Config) []string {
	set := map[string]bool{}
	for _, cl := range cfg.Clusters {
		if cl == nil || cl.Server == "" {
			continue
		}
		set[strings.TrimRight(cl.Server, "/")] = true
		if u, err := apiServerURL(cl.Server); err == nil {
			set[u.Host] = true
			// A very short name would match unrelated text.
			if len(u.Hostname()) >= 4 {
				set[u.Hostname()] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		if v != "" {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
