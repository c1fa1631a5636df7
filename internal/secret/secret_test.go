package secret

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func testSealer(t *testing.T, fill byte) *Sealer {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{fill}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpen(t *testing.T) {
	s := testSealer(t, 7)
	for _, plain := range [][]byte{[]byte("apiVersion: v1\nkind: Config\n"), {}, bytes.Repeat([]byte{0}, 1<<16)} {
		sealed, err := s.Seal(plain, "c-1")
		if err != nil {
			t.Fatal(err)
		}
		if sealed[0] != version2 {
			t.Fatalf("version byte %d", sealed[0])
		}
		if len(plain) > 8 && bytes.Contains(sealed, plain[:8]) {
			t.Fatal("sealed value contains the plaintext")
		}
		got, err := s.Open(sealed, "c-1")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("Open = %q, want %q", got, plain)
		}
	}
	a, _ := s.Seal([]byte("same"), "c-1")
	b, _ := s.Seal([]byte("same"), "c-1")
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same plaintext are equal: the nonce is not random")
	}
}

func TestOpenRefusesTamperAndWrongKey(t *testing.T) {
	s := testSealer(t, 7)
	sealed, err := s.Seal([]byte("token: abc"), "c-1")
	if err != nil {
		t.Fatal(err)
	}
	// Every single-bit change after the version byte fails to authenticate.
	for i := 1; i < len(sealed); i++ {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := s.Open(bad, "c-1"); !errors.Is(err, ErrOpen) {
			t.Fatalf("byte %d flipped: err = %v, want ErrOpen", i, err)
		}
	}
	if _, err := testSealer(t, 8).Open(sealed, "c-1"); !errors.Is(err, ErrOpen) {
		t.Fatalf("wrong key: err = %v", err)
	} else if !strings.Contains(err.Error(), "different key or for another cluster, or has been altered") {
		t.Fatalf("wrong key message: %v", err)
	}

	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"version", "\x03" + string(sealed[1:]), "unknown format version 3"},
		{"short", string(sealed[:10]), "too short"},
	} {
		if _, err := s.Open([]byte(tc.in), "c-1"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

// TestSealBoundToOwner: a value sealed for one cluster does not open for
// another, so a sealed kubeconfig copied onto another cluster's row is
// refused.
func TestSealBoundToOwner(t *testing.T) {
	s := testSealer(t, 7)
	sealed, err := s.Seal([]byte("kubeconfig of A"), "c-A")
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"c-B", "c-A ", "c-", "", "C-A"} {
		if _, err := s.Open(sealed, other); !errors.Is(err, ErrOpen) {
			t.Errorf("sealed for c-A, opened for %q: err = %v, want ErrOpen", other, err)
		}
	}
	if got, err := s.Open(sealed, "c-A"); err != nil || string(got) != "kubeconfig of A" {
		t.Fatalf("own cluster: %q, %v", got, err)
	}
	if _, err := s.Seal([]byte("x"), ""); err == nil {
		t.Fatal("Seal with no owner succeeded")
	}
}

// TestOpenRefusesVersion1: values of the old format, which were not bound
// to their cluster, are refused with an error saying what to do, even
// though they authenticate under the key.
func TestOpenRefusesVersion1(t *testing.T) {
	s := testSealer(t, 7)
	// A version 1 value as the old Seal wrote it: only the version byte
	// was associated data.
	ns := s.aead.NonceSize()
	v1 := make([]byte, 1+ns)
	v1[0] = version1
	v1 = s.aead.Seal(v1, v1[1:], []byte("old kubeconfig"), v1[:1])
	if plain, err := s.aead.Open(nil, v1[1:1+ns], v1[1+ns:], v1[:1]); err != nil || string(plain) != "old kubeconfig" {
		t.Fatalf("the test's version 1 value does not open as one: %v", err)
	}
	_, err := s.Open(v1, "c-1")
	if !errors.Is(err, ErrUnbound) {
		t.Fatalf("err = %v, want ErrUnbound", err)
	}
	if !strings.Contains(err.Error(), "attach the kubeconfig again") {
		t.Fatalf("the error does not say what to do: %v", err)
	}
}

func TestNewSealerKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := NewSealer(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "want 32") {
			t.Errorf("%d-byte key: err = %v", n, err)
		}
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "secret.key")
	s1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != KeySize {
		t.Fatalf("key file mode %v size %d", fi.Mode(), fi.Size())
	}
	key, _ := os.ReadFile(path)
	if bytes.Equal(key, make([]byte, KeySize)) {
		t.Fatal("key is all zeros")
	}
	sealed, err := s1.Seal([]byte("kubeconfig"), "c-1")
	if err != nil {
		t.Fatal(err)
	}
	// Loading again reads the same key; it does not make a new one.
	s2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Open(sealed, "c-1"); err != nil || string(got) != "kubeconfig" {
		t.Fatalf("reloaded key: %q, %v", got, err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, key) {
		t.Fatal("key file rewritten")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("files left next to the key: %v", ents)
	}
}

func TestLoadOrCreateKeyWrongSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	for _, content := range []string{"", "too short", strings.Repeat("x", 64)} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreateKey(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "exactly 32") {
			t.Errorf("%d-byte file: err = %v", len(content), err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("%d-byte file was changed", len(content))
		}
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	const n = 8
	sealers := make([]*Sealer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { sealers[i], errs[i] = LoadOrCreateKey(path) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("loader %d: %v", i, errs[i])
		}
		sealed, _ := sealers[i].Seal([]byte("x"), "c-1")
		final, err := LoadOrCreateKey(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := final.Open(sealed, "c-1"); err != nil {
			t.Fatalf("loader %d got a key other than the file's: %v", i, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("files left next to the key: %v", ents)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadKey(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("LoadKey of a missing file: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadKey created the missing file: %v", err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(short); err == nil || !strings.Contains(err.Error(), "3 bytes") {
		t.Fatalf("LoadKey of a short key: %v", err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, bytes.Repeat([]byte{7}, KeySize), 0o400); err != nil {
		t.Fatal(err)
	}
	s, err := LoadKey(good)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal([]byte("x"), "c-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := testSealer(t, 7).Open(sealed, "c-1"); err != nil || string(got) != "x" {
		t.Fatalf("a key loaded from a file opens %q, %v", got, err)
	}
}
