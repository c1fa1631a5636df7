package demo

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDataDirIsMade: a --data-dir that does not exist yet is made, owner
// only like the server's, and the demo starts in it.
func TestDataDirIsMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "demo")
	// At speed 1 nothing is ready (and no trainer started) before the
	// context ends the demo.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := Run(ctx, io.Discard, Options{DataDir: dir, Speed: 1})
	if err == nil || strings.Contains(err.Error(), "no such file") {
		t.Fatalf("the demo in a directory not made yet: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the data directory: %v, %v; want it made, mode 0700", fi, err)
	}
	for _, f := range []string{"fleet.yaml", "sparecap.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the demo's state: %v", err)
		}
	}
}

// TestDataDirThatCannotBeMade: a --data-dir under a file is a clear error,
// and nothing is made.
func TestDataDirThatCannotBeMade(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "demo")
	err := Run(context.Background(), io.Discard, Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "make the data directory "+dir+": mkdir "+file+": not a directory") {
		t.Fatalf("a data directory under a file: %v", err)
	}
	if es, _ := os.ReadDir(parent); len(es) != 1 {
		t.Fatalf("made %v", es)
	}
}
