package secret

import (
	"bytes"
	"errors"
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
		sealed, err := s.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if sealed[0] != version1 {
			t.Fatalf("version byte %d", sealed[0])
		}
		if len(plain) > 8 && bytes.Contains(sealed, plain[:8]) {
			t.Fatal("sealed value contains the plaintext")
		}
		got, err := s.Open(sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("Open = %q, want %q", got, plain)
		}
	}
	a, _ := s.Seal([]byte("same"))
	b, _ := s.Seal([]byte("same"))
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same plaintext are equal: the nonce is not random")
	}
}

func TestOpenRefusesTamperAndWrongKey(t *testing.T) {
	s := testSealer(t, 7)
	sealed, err := s.Seal([]byte("token: abc"))
	if err != nil {
		t.Fatal(err)
	}
	// Every single-bit change after the version byte fails to authenticate.
	for i := 1; i < len(sealed); i++ {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := s.Open(bad); !errors.Is(err, ErrOpen) {
			t.Fatalf("byte %d flipped: err = %v, want ErrOpen", i, err)
		}
	}
	if _, err := testSealer(t, 8).Open(sealed); !errors.Is(err, ErrOpen) {
		t.Fatalf("wrong key: err = %v", err)
	} else if !strings.Contains(err.Error(), "different key or has been altered") {
		t.Fatalf("wrong key message: %v", err)
	}

	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"version", "\x02" + string(sealed[1:]), "unknown format version 2"},
		{"short", string(sealed[:10]), "too short"},
	} {
		if _, err := s.Open([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
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
	sealed, err := s1.Seal([]byte("kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	// Loading again reads the same key; it does not make a new one.
	s2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Open(sealed); err != nil || string(got) != "kubeconfig" {
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
		sealed, _ := sealers[i].Seal([]byte("x"))
		final, err := LoadOrCreateKey(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := final.Open(sealed); err != nil {
			t.Fatalf("loader %d got a key other than the file's: %v", i, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("files left next to the key: %v", ents)
	}
}
