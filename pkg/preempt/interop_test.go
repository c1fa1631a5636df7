package preempt

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/pysdk"
)

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
	got := pysdk.Run(t, `
import sys, sparecap_preempt as sp
ck = sp.Store(sys.argv[1], verify_checksums=True).latest()
print(ck.step, sorted((f.name, f.size) for f in ck.files), ck.time.isoformat(), ck.cost > 0)
`, dir)
	want := "7 [('opt/blob', 5000), ('state', 1)] " + goCk.Time.Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000+00:00") + " True"
	if got != want {
		t.Errorf("Python read Go's checkpoint as\n %s\nwant\n %s", got, want)
	}

	pysdk.Run(t, `
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
