package server

import (
	"context"
	"strings"
	"testing"
)

// TestSecondServerOnSQLiteRefused: SQLite serves one server; a second on
// the same file is refused with an error that says so, and the first
// keeps serving.
func TestSecondServerOnSQLiteRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef"})
	if err == nil || !strings.Contains(err.Error(), "another sparecap server is using this SQLite database") {
		t.Fatalf("a second server on the same file: %v", err)
	}
	if _, err := first.Store.ListProjects(ctx); err != nil {
		t.Fatalf("the first server's store after the refusal: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Once the first has stopped, the file is free again.
	again, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef"})
	if err != nil {
		t.Fatalf("restart after the first stopped: %v", err)
	}
	again.Close()
}
