package webhooks

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/pysdk"
)

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
	if got := pysdk.Run(t, check, secret, "ev-1-2", ts, sig, body); got != "ev-1-2" {
		t.Errorf("Python on a Go delivery: %s", got)
	}
	if got := pysdk.Run(t, check, secret, "ev-1-2", ts, sig, strings.Replace(body, "gpu-1", "gpu-2", 1)); !strings.HasPrefix(got, "refused: no signature matches") {
		t.Errorf("Python on a changed body: %s", got)
	}
	pySig := pysdk.Run(t, `
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
