package preempt

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ManifestName is the file in a checkpoint that lists its files; a
// checkpoint without a valid one is not complete.
const ManifestName = "MANIFEST.json"

// ErrNoCheckpoint: no complete checkpoint.
var ErrNoCheckpoint = errors.New("no complete checkpoint")

// Checkpoint is a complete checkpoint.
type Checkpoint struct {
	// Dir holds its files.
	Dir  string    `json:"-"`
	Step int64     `json:"step"`
	Time time.Time `json:"time"`
	// Files are its files (not the manifest), by path relative to Dir.
	Files []File `json:"files"`
	// Cost is how long saving it took.
	Cost time.Duration `json:"cost_ns"`
}

// File is one file of a checkpoint.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Store keeps checkpoints in a directory: each in a directory of its own
// (ckpt-<step>), written under a temporary name, synced, and renamed into
// place, so a process killed mid-save leaves no checkpoint that looks
// complete. It is safe for one writer and any number of readers.
type Store struct {
	// Dir holds the checkpoints.
	Dir string
	// Keep is how many complete checkpoints Save leaves (default 3).
	Keep int
	// VerifyChecksums makes Latest read every file of a candidate and
	// check it against the manifest; by default it checks sizes (reading
	// terabytes on every start is not free).
	VerifyChecksums bool

	mu   sync.Mutex
	cost time.Duration
}

// Open returns the store of dir, creating it if needed.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint directory not set (" + EnvCheckpointDir + ")")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Store{Dir: dir}, nil
}

func dirName(step int64) string { return fmt.Sprintf("ckpt-%016d", step) }

// Save writes a checkpoint of step: write puts its files in the directory
// it is given; Save then syncs every file, writes the manifest, syncs the
// directory, renames it into place, and syncs the store's directory. It
// drops the oldest checkpoints beyond Keep. It measures the whole save as
// the checkpoint's cost (see Cost).
func (s *Store) Save(step int64, write func(dir string) error) (Checkpoint, error) {
	start := time.Now()
	s.cleanTemp()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.Dir, ".tmp-"+dirName(step)+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Checkpoint{}, err
	}
	fail := func(err error) (Checkpoint, error) {
		os.RemoveAll(tmp)
		return Checkpoint{}, err
	}
	if err := write(tmp); err != nil {
		return fail(fmt.Errorf("write checkpoint %d: %w", step, err))
	}
	ck := Checkpoint{Step: step, Time: time.Now().UTC()}
	err := filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != tmp {
				return syncPath(path)
			}
			return nil
		}
		rel, _ := filepath.Rel(tmp, path)
		if rel == ManifestName {
			return fmt.Errorf("a checkpoint file may not be called %s", ManifestName)
		}
		sum, size, err := hashAndSync(path)
		if err != nil {
			return err
		}
		ck.Files = append(ck.Files, File{Name: filepath.ToSlash(rel), Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("checkpoint %d: %w", step, err))
	}
	ck.Cost = time.Since(start)
	if err := writeSynced(filepath.Join(tmp, ManifestName), ck); err != nil {
		return fail(err)
	}
	if err := syncPath(tmp); err != nil {
		return fail(err)
	}
	final := filepath.Join(s.Dir, dirName(step))
	// A checkpoint of the same step (a job resumed and saved it again)
	// is replaced: moved aside first, as rename does not replace a
	// directory.
	if _, err := os.Stat(final); err == nil {
		old := final + ".old-" + hex.EncodeToString(rnd[:])
		if err := os.Rename(final, old); err != nil {
			return fail(err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := syncPath(s.Dir); err != nil {
		return Checkpoint{}, err
	}
	ck.Dir = final
	ck.Cost = time.Since(start)
	s.mu.Lock()
	s.cost = ck.Cost
	s.mu.Unlock()
	s.prune()
	return ck, nil
}

// Cost is how long the last Save took: the checkpoint cost δ of the
// interval formulas. Before any Save it is the cost recorded in the latest
// checkpoint's manifest, or 0.
func (s *Store) Cost() time.Duration {
	s.mu.Lock()
	c := s.cost
	s.mu.Unlock()
	if c > 0 {
		return c
	}
	if ck, err := s.Latest(); err == nil {
		return ck.Cost
	}
	return 0
}

// Latest returns the newest complete checkpoint: the one with the highest
// step whose manifest reads and whose files match it. Torn or corrupt
// ones are skipped. ErrNoCheckpoint if there is none.
func (s *Store) Latest() (Checkpoint, error) {
	all, err := s.candidates()
	if err != nil {
		return Checkpoint{}, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if ck, err := s.check(all[i]); err == nil {
			return ck, nil
		}
	}
	return Checkpoint{}, ErrNoCheckpoint
}

// candidates lists the checkpoint directories, oldest step first.
func (s *Store) candidates() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ckpt-") && !strings.Contains(e.Name(), ".old-") {
			if _, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "ckpt-"), 10, 64); err == nil {
				out = append(out, filepath.Join(s.Dir, e.Name()))
			}
		}
	}
	slices.Sort(out) // zero-padded steps sort as numbers
	return out, nil
}

// check reads dir's manifest and checks its files against it.
func (s *Store) check(dir string) (Checkpoint, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return Checkpoint{}, err
	}
	var ck Checkpoint
	if err := json.Unmarshal(b, &ck); err != nil {
		return Checkpoint{}, fmt.Errorf("%s: manifest: %w", dir, err)
	}
	if filepath.Base(dir) != dirName(ck.Step) {
		return Checkpoint{}, fmt.Errorf("%s: manifest of step %d", dir, ck.Step)
	}
	for _, f := range ck.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		fi, err := os.Stat(p)
		if err != nil {
			return Checkpoint{}, err
		}
		if fi.Size() != f.Size {
			return Checkpoint{}, fmt.Errorf("%s: %d bytes, manifest says %d", p, fi.Size(), f.Size)
		}
		if s.VerifyChecksums {
			sum, _, err := hashFile(p)
			if err != nil {
				return Checkpoint{}, err
			}
			if sum != f.SHA256 {
				return Checkpoint{}, fmt.Errorf("%s: checksum does not match the manifest", p)
			}
		}
	}
	ck.Dir = dir
	return ck, nil
}

// prune removes complete checkpoints beyond Keep, oldest first, and any
// directory a crash left behind.
func (s *Store) prune() {
	keep := s.Keep
	if keep <= 0 {
		keep = 3
	}
	all, err := s.candidates()
	if err != nil {
		return
	}
	var good []string
	for _, d := range all {
		if _, err := s.check(d); err == nil {
			good = append(good, d)
		}
	}
	for len(good) > keep {
		os.RemoveAll(good[0])
		good = good[1:]
	}
}

// cleanTemp removes what earlier saves left half-written.
func (s *Store) cleanTemp() {
	entries, _ := os.ReadDir(s.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") || strings.Contains(e.Name(), ".old-") {
			os.RemoveAll(filepath.Join(s.Dir, e.Name()))
		}
	}
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// hashAndSync hashes a file and syncs it to disk.
func hashAndSync(path string) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeSynced(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
