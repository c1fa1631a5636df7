package preempt

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// AnnotationLastCheckpoint is the pod annotation that says when the pod's
// work last committed a checkpoint (RFC 3339). sparecap's driver reads it:
// among the nodes a reclaim must take, one whose work checkpointed a
// moment ago goes before one whose work has run for hours since.
const AnnotationLastCheckpoint = "sparecap.dev/last-checkpoint"

// AnnotationProgress is the pod annotation that says how many units of
// work (epochs, steps) the pod's job has completed so far, as a decimal
// count: after a restart from a checkpoint, the count it resumed from.
// sparecap's cost allocation divides a job's cost by the most it
// reached, so work redone after a reclaim counts as cost.
const AnnotationProgress = "sparecap.dev/progress"

// The service account's files in a pod.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	reportTimeout     = 10 * time.Second
)

// PodReporter writes a checkpoint's time to the pod's
// AnnotationLastCheckpoint: one merge patch of that key, with the pod's
// own service account, which needs patch on pods in its namespace (the
// Role in docs/workloads.md). It is a courtesy to the job: a report that
// fails changes nothing but which node a reclaim takes first.
type PodReporter struct {
	// Server is the API server's URL.
	Server string
	// TokenFile holds the bearer token, read at every report: a pod's
	// projected token is rotated by its kubelet.
	TokenFile string
	// Namespace and Pod name the pod (POD_NAMESPACE and POD_NAME from the
	// Downward API in the pod spec).
	Namespace, Pod string
	// Client makes the calls; it trusts the API server's CA.
	Client *http.Client
}

// InClusterReporter is the PodReporter of the pod it runs in, from
// POD_NAMESPACE and POD_NAME, KUBERNETES_SERVICE_HOST and _PORT, and the
// service account's token and CA. It errs, saying what is missing,
// outside a pod set up for it.
func InClusterReporter() (*PodReporter, error) {
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	switch {
	case ns == "" || pod == "":
		return nil, errors.New("POD_NAMESPACE and POD_NAME are not set (give them from the Downward API: docs/workloads.md)")
	case host == "" || port == "":
		return nil, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not in a Kubernetes pod")
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("the service account's CA: %w (is automountServiceAccountToken off?)", err)
	}
	return NewPodReporter("https://"+net.JoinHostPort(host, port), serviceAccountDir+"/token", ca, ns, pod)
}

// NewPodReporter is a PodReporter of pod ns/pod on server, trusting the
// PEM certificates ca.
func NewPodReporter(server, tokenFile string, ca []byte, ns, pod string) (*PodReporter, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the API server's CA holds no PEM certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Proxy: http.ProxyFromEnvironment}
	return &PodReporter{Server: strings.TrimSuffix(server, "/"), TokenFile: tokenFile, Namespace: ns, Pod: pod,
		Client: &http.Client{Transport: tr, Timeout: reportTimeout}}, nil
}

// ReportError is a report the API server answered with an error.
type ReportError struct {
	// What was reported: "checkpoint" or "progress".
	What   string
	Status int
	// Message is the server's, cut to 200 bytes.
	Message string
}

func (e *ReportError) Error() string {
	return fmt.Sprintf("report the %s: the API server answered %d: %s", cmpOr(e.What, "checkpoint"), e.Status, e.Message)
}

// Report writes at (to the second, UTC) to the pod's
// AnnotationLastCheckpoint. Call it after Save with the checkpoint's
// Time; it gives up after 10 seconds.
func (r *PodReporter) Report(ctx context.Context, at time.Time) error {
	return r.patch(ctx, "checkpoint", AnnotationLastCheckpoint, at.UTC().Truncate(time.Second).Format(time.RFC3339))
}

// ReportProgress writes units, the units of work the job has completed
// (epochs, steps), to the pod's AnnotationProgress; negative is refused.
// Report it now and then (each report is an API call), and after a
// restart the count the job resumed from.
func (r *PodReporter) ReportProgress(ctx context.Context, units int64) error {
	if units < 0 {
		return fmt.Errorf("report the progress: %d units is negative", units)
	}
	return r.patch(ctx, "progress", AnnotationProgress, strconv.FormatInt(units, 10))
}

// patch sets the pod's annotation key to value: one merge patch.
func (r *PodReporter) patch(ctx context.Context, what, key, value string) error {
	token, err := os.ReadFile(r.TokenFile)
	if err != nil {
		return fmt.Errorf("report the %s: the service account's token: %w", what, err)
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s?fieldManager=sparecap-checkpoint",
		r.Server, url.PathEscape(r.Namespace), url.PathEscape(r.Pod))
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("report the %s: %w", what, err)
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := r.Client.Do(req)
	if err != nil {
		return fmt.Errorf("report the %s: %w", what, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		var st struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(msg, &st) == nil && st.Message != "" {
			msg = []byte(st.Message)
		}
		return &ReportError{What: what, Status: resp.StatusCode, Message: cut(string(msg), 200)}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cut is s cut to n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
