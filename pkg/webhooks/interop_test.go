package webhooks

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// python runs code with the Python SDK (sdk/python) importable; python3 is
// part of the test suite's needs (make test runs the Python SDK's tests):
// a missing one fails here.
func python(t *testing.T, code string, args ...string) string {
	t.Helper()
	sdk, err := filepath.Abs("../../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", append([]string{"-c", code}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPythonInterop: a delivery signed here verifies with the Python
// SDK, a forged one does not, and a signature made there verifies here.
func TestPythonInterop(t *testing.T) {
	secret, _ := NewSecret()
	now := time.Now()
	body := `{"id":"ev-1-2","data":{"message":"node gpu-1 is reclaimed — pods get SIGTERM"}}`
	sig, err := Sign(secret, "ev-1-2", now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	const check = `
import sys, sparecap_preempt.webhooks as wh
h = {"Webhook-Id": sys.argv[2], "Webhook-Timestamp": sys.argv[3], "Webhook-Signature": sys.argv[4]}
try:
    print(wh.verify(sys.argv[1], h, sys.argv[5].encode()))
except wh.WebhookVerificationError as e:
    print("refused:", e)
`
	ts := strconv.FormatInt(now.Unix(), 10)
	if got := python(t, check, secret, "ev-1-2", ts, sig, body); got != "ev-1-2" {
		t.Errorf("Python on a Go delivery: %s", got)
	}
	if got := python(t, check, secret, "ev-1-2", ts, sig, strings.Replace(body, "gpu-1", "gpu-2", 1)); !strings.HasPrefix(got, "refused: no signature matches") {
		t.Errorf("Python on a changed body: %s", got)
	}
	pySig := python(t, `
import sys, sparecap_preempt.webhooks as wh
print(wh.sign(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()))
`, secret, "ev-1-2", ts, body)
	h := http.Header{}
	h.Set(HeaderID, "ev-1-2")
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, pySig)
	if pySig != sig || Verify(secret, h, []byte(body), now) != nil {
		t.Errorf("Python signed %q; Go %q", pySig, sig)
	}
}
