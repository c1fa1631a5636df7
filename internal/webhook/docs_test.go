package webhook

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// The verification recipes of docs/webhooks.md are run here as a
// newcomer copies them: the code blocks after the doc's test markers,
// unchanged, against real deliveries.

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// docBlock returns the code block of docs/webhooks.md after the marker
// naming what.
func docBlock(t *testing.T, what string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- test: "+what+" internal/webhook/docs_test.go")
	if !ok {
		t.Fatalf("docs/webhooks.md has no block marked %q", what)
	}
	_, after, _ = strings.Cut(after, "\n```")
	_, after, _ = strings.Cut(after, "\n") // the fence's language
	block, _, ok := strings.Cut(after, "\n```")
	if !ok {
		t.Fatalf("docs/webhooks.md: the block %q does not end", what)
	}
	return block + "\n"
}

// TestDocsExampleDelivery: the doc's example delivery verifies with the
// example secret it names, and its body has the fields a real
// PreemptionNotified message has, no more and no fewer.
func TestDocsExampleDelivery(t *testing.T) {
	block := docBlock(t, "the example delivery")
	head, body, ok := strings.Cut(block, "\n\n")
	if !ok {
		t.Fatalf("the example has no blank line between headers and body:\n%s", block)
	}
	body = strings.TrimSuffix(body, "\n")
	h := http.Header{}
	for _, l := range strings.Split(head, "\n")[1:] {
		k, v, _ := strings.Cut(l, ": ")
		h.Set(k, v)
	}
	doc, _ := os.ReadFile(filepath.Join(repoRoot(t), "docs", "webhooks.md"))
	secret := regexp.MustCompile(`signed\s+with the secret\s+` + "`" + `(whsec_[A-Za-z0-9+/=]+)` + "`").FindSubmatch(doc)
	if secret == nil {
		t.Fatal("docs/webhooks.md does not name the example's secret")
	}
	ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err := webhooks.Verify(string(secret[1]), h, []byte(body), time.Unix(ts, 0)); err != nil {
		t.Fatalf("the example delivery does not verify with the example secret: %v", err)
	}
	if h.Get("Content-Type") != ContentType || h.Get("User-Agent") != UserAgent {
		t.Errorf("example headers %v", h)
	}
	deadline := time.Date(2026, 11, 30, 4, 48, 54, 0, time.UTC)
	e := domain.Event{Seq: 1042, ID: "ev-1", ClusterID: "c-1", NodeID: "n-1", NodeName: "x", Reason: domain.ReasonPreemptionNotified,
		Message: "m", Timestamp: deadline, Deadline: deadline}
	real, err := eventMessage(e, domain.Cluster{ID: "c-1", ProjectID: "p", Type: domain.ClusterKubernetes},
		workOf(domain.ClusterKubernetes, []driver.Work{{Namespace: "ml", Name: "t", UID: "u"}}), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonKeys(t, []byte(body)), jsonKeys(t, real.Body); !slices.Equal(got, want) {
		t.Errorf("the example's fields\n %v\ndiffer from a real message's\n %v", got, want)
	}
	var ev struct{ ID string }
	json.Unmarshal([]byte(body), &ev)
	if ev.ID != h.Get("webhook-id") {
		t.Errorf("the example's id %q is not its webhook-id %q", ev.ID, h.Get("webhook-id"))
	}
}

// jsonKeys lists the paths of every field of a JSON document, in order.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				out = append(out, prefix+k)
				walk(prefix+k+".", x)
			}
		case []any:
			if len(v) > 0 {
				walk(prefix+"[].", v[0])
			}
		}
	}
	walk("", v)
	slices.Sort(out)
	return out
}

// freePort returns a port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// output is a process's output, read as it comes.
type output struct {
	mu    sync.Mutex
	lines []string
}

func (o *output) add(l string) {
	o.mu.Lock()
	o.lines = append(o.lines, l)
	o.mu.Unlock()
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// startReceiver runs cmd (a receiver from the doc) and waits until it
// answers on port.
func startReceiver(t *testing.T, cmd *exec.Cmd, port string) *output {
	t.Helper()
	out := &output{}
	pr, pw, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.add(sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the receiver's output:\n%s", out)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver does not listen on %s: %v\n%s", port, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitOutput(t *testing.T, out *output, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not print %q; it printed:\n%s", want, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDocsGoReceiver builds and runs the doc's Go receiver.
func TestDocsGoReceiver(t *testing.T) {
	root := repoRoot(t)
	// Inside the module, so it builds with the module's pkg/webhooks; a
	// directory whose name starts with "." is left out of ./... .
	dir, err := os.MkdirTemp(root, ".doctest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(docBlock(t, "the Go receiver")), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "receiver")
	build := exec.Command("go", "build", "-o", bin, "./"+filepath.Base(dir))
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the doc's Go receiver does not build: %v\n%s", err, out)
	}
	port := freePort(t)
	checkReceiver(t, "http://127.0.0.1:"+port+"/sparecap", func(s string) *output {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "SPARECAP_WEBHOOK_SECRET="+s, "LISTEN_ADDR=127.0.0.1:"+port)
		return startReceiver(t, cmd, port)
	}, func(deadline time.Time) string {
		return fmt.Sprintf("node gpu-1 of c-k is reclaimed by %s; its pods: [{ml trainer-0}]", deadline.Format(time.RFC3339))
	})
}

// TestDocsPythonReceiver runs the doc's Python receiver with the SDK.
func TestDocsPythonReceiver(t *testing.T) {
	script := filepath.Join(t.TempDir(), "receiver.py")
	if err := os.WriteFile(script, []byte(docBlock(t, "the Python receiver")), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	checkReceiver(t, "http://127.0.0.1:"+port+"/sparecap", func(s string) *output {
		cmd := exec.Command("python3", script)
		cmd.Env = append(os.Environ(), "SPARECAP_WEBHOOK_SECRET="+s, "PORT="+port,
			"PYTHONPATH="+filepath.Join(repoRoot(t), "sdk", "python"))
		return startReceiver(t, cmd, port)
	}, func(deadline time.Time) string {
		return fmt.Sprintf("node gpu-1 of c-k is reclaimed by %s pods ['ml/trainer-0']", deadline.Format(time.RFC3339))
	})
}

// checkReceiver registers an endpoint at url, starts the receiver there
// with its secret, sends it a real PreemptionNotified, the same delivery
// again, forged ones and an old one, and checks what it answered and
// printed (notice: the line naming the node, deadline and pod).
func checkReceiver(t *testing.T, url string, start func(secret string) *output, notice func(time.Time) string) {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.Clock = clock.Real{} })
	f.drv.work["c-k/gpu-1"] = []driver.Work{{Namespace: "ml", Name: "trainer-0", UID: "u0"}}
	ep, secret := f.endpoint("p", url, nil)
	received := start(secret)
	out := func() *output { return received }
	deadline := time.Now().Add(5 * time.Minute).UTC().Truncate(time.Second)
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, deadline)
	f.step()
	d := f.deliveries(ep.ID)
	if len(d) != 1 || d[0].State != domain.DeliveryDelivered {
		t.Fatalf("the receiver did not take the notice: %+v", d)
	}
	want := notice(deadline)
	waitOutput(t, out(), want)

	m, err := f.st.GetWebhookMessage(f.ctx, d[0].MessageID)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r := f.svc.post(ctx, url, m, []string{secret}, time.Now()); !r.ok() {
		t.Errorf("the same delivery again: %+v; want 2xx", r)
	}
	waitOutput(t, out(), "delivery "+m.ID+" handled already")
	other, _ := webhooks.NewSecret()
	if r := f.svc.post(ctx, url, m, []string{other}, time.Now()); r.status != http.StatusUnauthorized {
		t.Errorf("a delivery signed with another secret: %+v; want 401", r)
	}
	// The real signature on a changed body.
	sig, _ := webhooks.Sign(secret, m.ID, time.Now(), m.Body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(strings.Replace(string(m.Body), "gpu-1", "gpu-2", 1)))
	req.Header.Set(webhooks.HeaderID, m.ID)
	req.Header.Set(webhooks.HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set(webhooks.HeaderSignature, sig)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a changed body: %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if r := f.svc.post(ctx, url, m, []string{secret}, time.Now().Add(-10*time.Minute)); r.status != http.StatusUnauthorized || !strings.Contains(r.err, "too far") {
		t.Errorf("a delivery signed 10 minutes ago (a replay): %+v; want 401 saying it is too old", r)
	}
	if n := strings.Count(out().String(), want); n != 1 {
		t.Errorf("the receiver acted on the notice %d times; want once", n)
	}
}

// TestDocsShellRecipe runs the doc's shell lines on a real delivery as
// received, a changed one, an old one, and one of a rotation, signed by
// two secrets.
func TestDocsShellRecipe(t *testing.T) {
	script := docBlock(t, "the shell recipe")
	for _, tool := range []string{"bash", "openssl", "base64", "od"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the recipe needs %s: %v", tool, err)
		}
	}
	f := newFixture(t, func(c *Config) { c.Clock = clock.Real{} })
	r := newReceiver(t, nil)
	ep, secret := f.endpoint("p", r.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, time.Now().Add(5*time.Minute))
	f.step()
	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	run := func(secret string, h http.Header, body []byte) (string, error) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET="+secret, "WEBHOOK_ID="+h.Get("webhook-id"),
			"WEBHOOK_TIMESTAMP="+h.Get("webhook-timestamp"), "WEBHOOK_SIGNATURE="+h.Get("webhook-signature"))
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	h, body := got[0].header, got[0].body
	if out, err := run(secret, h, body); err != nil || out != "verified "+h.Get("webhook-id") {
		t.Errorf("a real delivery: %q, %v", out, err)
	}
	changed := []byte(strings.Replace(string(body), "gpu-1", "gpu-2", 1))
	if out, err := run(secret, h, changed); err == nil || out != "refused: no signature matches" {
		t.Errorf("a changed body: %q, %v", out, err)
	}
	other, _ := webhooks.NewSecret()
	if out, err := run(other, h, body); err == nil || out != "refused: no signature matches" {
		t.Errorf("another secret: %q, %v", out, err)
	}
	// The same delivery signed 10 minutes ago: a replay.
	old := time.Now().Add(-10 * time.Minute)
	oldSig, _ := webhooks.Sign(secret, h.Get("webhook-id"), old, body)
	oh := h.Clone()
	oh.Set("webhook-timestamp", strconv.FormatInt(old.Unix(), 10))
	oh.Set("webhook-signature", oldSig)
	if out, err := run(secret, oh, body); err == nil || !strings.HasPrefix(out, "refused: signed 6") {
		t.Errorf("an old delivery: %q, %v", out, err)
	}
	// During a rotation: either secret verifies a delivery signed by both.
	newSecret, sealed, _ := NewSecret(f.sealer, ep.ID)
	ep.PreviousSecret, ep.Secret, ep.PreviousUntil = ep.Secret, sealed, time.Now().Add(time.Hour)
	f.update(func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(f.ctx, ep) })
	f.event("c-k", "gpu-2", domain.ReasonNodeAdded, time.Time{})
	f.step()
	got = r.requests()
	last := got[len(got)-1]
	for _, s := range []string{secret, newSecret} {
		if out, err := run(s, last.header, last.body); err != nil || !strings.HasPrefix(out, "verified ") {
			t.Errorf("a delivery signed by both secrets, checked with one: %q, %v", out, err)
		}
	}
}
