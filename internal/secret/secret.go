// Package secret seals small secrets (a cluster's kubeconfig) for storage
// with AES-256-GCM under one key the server keeps in a file of its own, out
// of the database: a copy of the database alone does not reveal them.
//
// A sealed value is a version byte, a random 12-byte nonce and the GCM
// ciphertext with its tag. Each value is bound to its owner, the ID of the
// record it belongs to (a kubeconfig's cluster): the version byte and the
// owner are the AEAD's associated data, so no part of a sealed value can be
// altered, nor the value copied onto another record, without Open
// noticing.
//
// Format version 1 sealed values without an owner. Such values are refused
// with ErrUnbound, not opened: accepting them would let a value copied from
// one record to another open there. Whoever stored one seals it again
// (for a kubeconfig: attaches it again).
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the size of a key in bytes (AES-256).
const KeySize = 32

// Format versions. Both are version || nonce || ciphertext+tag; version1
// authenticated only the version byte, version2 authenticates the version
// byte followed by the owner. Only version2 is written or opened.
const (
	version1 byte = 1
	version2 byte = 2
)

// ErrOpen is returned by Open when a sealed value fails to authenticate:
// it was sealed under another key, or for another owner (a kubeconfig
// copied onto another cluster), or has been altered.
var ErrOpen = errors.New("cannot open sealed secret: it was sealed with a different key or for another cluster, or has been altered")

// ErrUnbound is returned by Open for a value in format version 1, which is
// not bound to its owner and is refused (see the package comment).
var ErrUnbound = errors.New("cannot open sealed secret: it is in an old format that is not bound to its cluster and is no longer accepted; " +
	"attach the kubeconfig again (sparecap clusters attach)")

// Sealer seals and opens secrets under one key. It is safe for concurrent
// use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer for a KeySize-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key is %d bytes; want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// LoadOrCreateKey returns a Sealer for the key in the file at path. If the
// file does not exist it is created, mode 0600, with KeySize fresh random
// bytes (its directory, mode 0700, too). The key file appears complete or
// not at all, and never replaces a file created meanwhile: processes
// starting together all end up with the same key. A file that exists but
// does not hold exactly KeySize bytes is an error; it is never replaced,
// since whatever was sealed under it would be lost.
func LoadOrCreateKey(path string) (*Sealer, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(path)
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: use that one.
			key, err = os.ReadFile(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key file %s holds %d bytes; a sparecap secret key is exactly %d random bytes "+
			"(restore the original file: secrets sealed with it cannot be opened without it)", path, len(key), KeySize)
	}
	return NewSealer(key)
}

// LoadKey returns a Sealer for the key in the file at path, which must
// exist: a key provided by the operator (a mounted Kubernetes Secret, say)
// is never created or replaced by the server.
func LoadKey(path string) (*Sealer, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key file %s holds %d bytes; a sparecap secret key is exactly %d random bytes "+
			"(head -c %d /dev/urandom > FILE makes one)", path, len(key), KeySize, KeySize)
	}
	return NewSealer(key)
}

// createKey writes a new random key to path and returns it; the error
// wraps fs.ErrExist if path exists. The key is written to a temporary file
// (created with O_EXCL, mode 0600) that is then linked to path, so no
// reader ever sees a partial key. Where the file system has no hard links,
// path itself is created with O_EXCL and written.
func createKey(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // O_EXCL, 0600
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := writeSync(tmp, key); err != nil {
		return nil, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	switch err := os.Link(tmp.Name(), path); {
	case err == nil:
		// The key must outlive a crash, or what is sealed with it is lost.
		if d, err := os.Open(dir); err == nil {
			_ = d.Sync()
			d.Close()
		}
		return key, nil
	case errors.Is(err, fs.ErrExist):
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := writeSync(f, key); err != nil {
		// Leave no short key file behind to be refused on the next start.
		_ = os.Remove(path)
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}

// writeSync writes b to f, syncs and closes it.
func writeSync(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Seal encrypts and authenticates plaintext, bound to owner: the ID of the
// record it will be stored with (for a kubeconfig, its cluster's ID). Only
// Open with the same owner opens it. Sealing the same plaintext twice gives
// different results.
func (s *Sealer) Seal(plaintext []byte, owner string) ([]byte, error) {
	if owner == "" {
		return nil, errors.New("seal: no owner to bind the secret to")
	}
	ns := s.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+s.aead.Overhead())
	out[0] = version2
	if _, err := io.ReadFull(rand.Reader, out[1:]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return s.aead.Seal(out, out[1:], plaintext, associated(version2, owner)), nil
}

// Open returns the plaintext of a value Seal returned for the same owner.
// It returns ErrOpen if the value was sealed under another key or for
// another owner, or was altered; ErrUnbound if it is in format version 1;
// and a descriptive error if it is not a sealed value at all.
func (s *Sealer) Open(sealed []byte, owner string) ([]byte, error) {
	ns := s.aead.NonceSize()
	switch {
	case len(sealed) == 0:
		return nil, errors.New("cannot open sealed secret: it is empty")
	case sealed[0] == version1:
		return nil, ErrUnbound
	case sealed[0] != version2:
		return nil, fmt.Errorf("cannot open sealed secret: unknown format version %d (this build reads version %d)", sealed[0], version2)
	case len(sealed) < 1+ns+s.aead.Overhead():
		return nil, fmt.Errorf("cannot open sealed secret: %d bytes is too short to be one (truncated?)", len(sealed))
	}
	plain, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], associated(sealed[0], owner))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// associated is the AEAD associated data of a sealed value: its version
// byte, then its owner.
func associated(version byte, owner string) []byte {
	return append([]byte{version}, owner...)
}
