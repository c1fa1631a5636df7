package preempt

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPodReporter: a report is one merge patch of the pod's annotation,
// with the token as the file holds it now (a rotated token is used at
// once), to the second in UTC; an error answer comes back as a
// ReportError with the server's message, cut.
func TestPodReporter(t *testing.T) {
	type call struct{ method, path, query, ctype, auth, body string }
	var calls []call
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls = append(calls, call{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)})
		w.WriteHeader(status)
		if status != http.StatusOK {
			json.NewEncoder(w).Encode(map[string]string{"message": `pods "train-0" is forbidden: ` + strings.Repeat("x", 500)})
		}
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("first\n"), 0o600)
	rep, err := NewPodReporter(srv.URL+"/", token, ca, "ml team", "train-0")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 1, 2, 3, 400_000_000, time.FixedZone("x", 3600))
	if err := rep.Report(context.Background(), at); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(token, []byte("rotated"), 0o600)
	status = http.StatusForbidden
	err = rep.Report(context.Background(), at)
	var re *ReportError
	if !errors.As(err, &re) || re.Status != 403 || !strings.HasPrefix(re.Message, `pods "train-0" is forbidden`) || len(re.Message) > 200 {
		t.Fatalf("a refused report: %v", err)
	}
	want := call{"PATCH", "/api/v1/namespaces/ml%20team/pods/train-0", "fieldManager=sparecap-checkpoint", "application/merge-patch+json",
		"Bearer first", `{"metadata":{"annotations":{"sparecap.dev/last-checkpoint":"2026-12-06T00:02:03Z"}}}`}
	if len(calls) != 2 || calls[0] != want || calls[1].auth != "Bearer rotated" {
		t.Fatalf("calls %+v\nwant first %+v", calls, want)
	}
	status = http.StatusOK
	if err := rep.ReportProgress(context.Background(), 42); err != nil {
		t.Fatal(err)
	}
	if got := calls[2].body; got != `{"metadata":{"annotations":{"sparecap.dev/progress":"42"}}}` {
		t.Fatalf("progress report %s", got)
	}
	if err := rep.ReportProgress(context.Background(), -1); err == nil || len(calls) != 3 {
		t.Fatalf("a negative progress: %v, %d calls", err, len(calls))
	}

	if _, err := NewPodReporter(srv.URL, token, []byte("not a certificate"), "ml", "p"); err == nil {
		t.Error("a CA without a certificate was taken")
	}
	t.Setenv("POD_NAME", "")
	if _, err := InClusterReporter(); err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE and POD_NAME") {
		t.Errorf("outside a pod: %v", err)
	}
}
