package preempt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// saveStep writes a checkpoint of step: a state file naming the step and a
// larger blob under a subdirectory.
func saveStep(s *Store, step int64, blob int) (Checkpoint, error) {
	return s.Save(step, func(dir string) error {
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(strconv.FormatInt(step, 10)), 0o644); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(dir, "opt"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "opt", "blob"), bytes.Repeat([]byte{byte(step)}, blob), 0o644)
	})
}

func TestCheckpoints(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("empty store: %v", err)
	}
	for step := range int64(5) {
		ck, err := saveStep(s, step*10, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Step != step*10 || len(ck.Files) != 2 || ck.Cost <= 0 || filepath.Base(ck.Dir) != dirName(step*10) {
			t.Fatalf("saved %+v", ck)
		}
	}
	ck, err := s.Latest()
	if err != nil || ck.Step != 40 {
		t.Fatalf("latest %+v, %v", ck, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ck.Dir, "state")); string(b) != "40" {
		t.Fatalf("state %q", b)
	}
	all, _ := s.candidates()
	if len(all) != 3 {
		t.Fatalf("%d checkpoints kept, want 3: %v", len(all), all)
	}
	if s.Cost() <= 0 {
		t.Fatal("no cost measured")
	}
	if c := (&Store{Dir: s.Dir}).Cost(); c != ck.Cost {
		t.Fatalf("a new store's cost %v, want the manifest's %v", c, ck.Cost)
	}

	// A torn newest (a file shorter than the manifest says): skipped.
	os.WriteFile(filepath.Join(ck.Dir, "opt", "blob"), []byte("short"), 0o644)
	if got, err := s.Latest(); err != nil || got.Step != 30 {
		t.Fatalf("with the newest torn: %+v, %v", got, err)
	}
	// Same size, other bytes: found only when checksums are verified.
	prev := filepath.Join(s.Dir, dirName(30), "opt", "blob")
	os.WriteFile(prev, bytes.Repeat([]byte{0xff}, 1000), 0o644)
	if got, _ := s.Latest(); got.Step != 30 {
		t.Fatalf("sizes only: %+v", got)
	}
	s.VerifyChecksums = true
	if got, err := s.Latest(); err != nil || got.Step != 20 {
		t.Fatalf("with checksums: %+v, %v", got, err)
	}
	// No manifest (killed before it was written): not a checkpoint.
	os.Remove(filepath.Join(s.Dir, dirName(20), ManifestName))
	if _, err := s.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("no manifest anywhere: %v", err)
	}
	// A failed write leaves nothing.
	if _, err := s.Save(99, func(string) error { return errors.New("disk full") }); err == nil {
		t.Fatal("a failed write saved")
	}
	if _, err := os.Stat(filepath.Join(s.Dir, dirName(99))); !os.IsNotExist(err) {
		t.Fatal("a failed save left its checkpoint")
	}
	// The same step again replaces it.
	if _, err := saveStep(s, 40, 10); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Latest(); err != nil || got.Step != 40 || got.Files[0].Size != 10 && got.Files[1].Size != 10 {
		t.Fatalf("re-saved step 40: %+v, %v", got, err)
	}
	if _, err := Open(""); err == nil {
		t.Fatal("Open(\"\") works")
	}
}

// The helper process of TestKilledMidSave: saves checkpoints of growing
// steps, each with a blob written in slow pieces, until killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PREEMPT_SAVER_DIR"); dir != "" {
		s, err := Open(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		s.Keep = 2
		start := int64(1) // resume after the latest complete checkpoint
		if ck, err := s.Latest(); err == nil {
			start = ck.Step + 1
		}
		for step := start; ; step++ {
			_, err := s.Save(step, func(dir string) error {
				f, err := os.Create(filepath.Join(dir, "blob"))
				if err != nil {
					return err
				}
				defer f.Close()
				for range 20 {
					if _, err := f.Write(bytes.Repeat([]byte{byte(step)}, 64<<10)); err != nil {
						return err
					}
					time.Sleep(time.Millisecond)
				}
				return os.WriteFile(filepath.Join(dir, "state"), []byte(strconv.FormatInt(step, 10)), 0o644)
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	os.Exit(m.Run())
}

// TestKilledMidSave: a saver SIGKILLed at random moments, and resumed
// from its latest checkpoint on the same directory, again and again,
// always leaves a latest checkpoint that is complete, whose every byte
// matches its manifest, and never older than the one before.
func TestKilledMidSave(t *testing.T) {
	dir := t.TempDir()
	rnd := rand.New(rand.NewPCG(1, 2))
	last := int64(0)
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PREEMPT_SAVER_DIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rnd.IntN(200)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		s := &Store{Dir: dir, VerifyChecksums: true}
		ck, err := s.Latest()
		if errors.Is(err, ErrNoCheckpoint) && last == 0 {
			continue // killed before its first checkpoint
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		b, err := os.ReadFile(filepath.Join(ck.Dir, "state"))
		if err != nil || string(b) != strconv.FormatInt(ck.Step, 10) {
			t.Fatalf("round %d: checkpoint %d holds state %q (%v)", round, ck.Step, b, err)
		}
		if ck.Step < last {
			t.Fatalf("round %d: latest checkpoint %d, before it %d: a resumed job went back", round, ck.Step, last)
		}
		last = ck.Step
	}
	if last == 0 {
		t.Fatal("no checkpoint was ever completed")
	}
}
