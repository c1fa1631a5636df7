package preempt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// python runs code with the Python SDK (sdk/python) importable and
// returns its output. python3 is part of the test suite's needs (make
// test runs the Python SDK's own tests): a missing one fails here.
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

// TestPythonInterop: a checkpoint saved by either SDK is the other's
// latest, with its step, files, sizes, checksums, time and cost.
func TestPythonInterop(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.VerifyChecksums = true
	goCk, err := saveStep(s, 7, 5000)
	if err != nil {
		t.Fatal(err)
	}
	got := python(t, `
import sys, sparecap_preempt as sp
ck = sp.Store(sys.argv[1], verify_checksums=True).latest()
print(ck.step, sorted((f.name, f.size) for f in ck.files), ck.time.isoformat(), ck.cost > 0)
`, dir)
	want := "7 [('opt/blob', 5000), ('state', 1)] " + goCk.Time.Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000+00:00") + " True"
	if got != want {
		t.Errorf("Python read Go's checkpoint as\n %s\nwant\n %s", got, want)
	}

	python(t, `
import os, sys, sparecap_preempt as sp
def write(d):
    os.mkdir(os.path.join(d, "opt"))
    open(os.path.join(d, "state"), "w").write("12")
    open(os.path.join(d, "opt", "blob"), "wb").write(b"x" * 3000)
sp.Store(sys.argv[1]).save(12, write)
`, dir)
	ck, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if ck.Step != 12 || len(ck.Files) != 2 || ck.Files[0].Name != "opt/blob" || ck.Files[0].Size != 3000 || ck.Cost <= 0 ||
		time.Since(ck.Time) > time.Minute || filepath.Base(ck.Dir) != "ckpt-0000000000000012" {
		t.Errorf("Go read Python's checkpoint as %+v", ck)
	}
	// And Python's prune keeps Go's checkpoint among the last three.
	if all, _ := s.candidates(); len(all) != 2 {
		t.Errorf("checkpoints after both saves: %v", all)
	}
}
