// Package pysdk runs Python code against the repository's Python SDK
// (sdk/python), for the Go tests that check the two SDKs agree.
package pysdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Run runs code with python3 and the Python SDK importable, and returns
// its output trimmed. python3 is part of the test suite's needs (make
// test runs the Python SDK's own tests): a missing one, or code that
// fails, fails t.
func Run(t testing.TB, code string, args ...string) string {
	t.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("pysdk: cannot tell where the repository is")
	}
	sdk := filepath.Join(filepath.Dir(here), "..", "..", "sdk", "python")
	cmd := exec.Command("python3", append([]string{"-c", code}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
