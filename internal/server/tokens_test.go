package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
)

// TestOperatorTokenBootstrap: the configured admin token must resist
// guessing, starts things off when the store has no operator token, and
// once operators rotated it a restart with the same setting does not
// bring it back.
func TestOperatorTokenBootstrap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(token string, logs *logBuffer) Options {
		o := Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: token, ConfigPath: filepath.Join(dir, "cli.yaml")}
		if logs != nil {
			o.Log = slog.New(slog.NewTextHandler(logs, nil))
		}
		return o
	}
	if _, err := Start(ctx, opts("12345678", nil)); err == nil || !strings.Contains(err.Error(), "at least 32 characters") {
		t.Fatalf("an 8-character admin token: %v", err)
	}
	srv, err := Start(ctx, opts(testAdmin, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL, testAdmin)
	list, err := c.ListTokens(ctx, client.TokenScope{})
	if err != nil || len(list.Tokens) != 1 || !list.Tokens[0].Operator {
		t.Fatalf("operator tokens after the first start: %+v, %v", list, err)
	}
	next, err := c.RotateToken(ctx, client.TokenScope{}, list.Tokens[0].TokenID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTokens(ctx, client.TokenScope{}); !client.IsUnauthorized(err) {
		t.Fatalf("the rotated-away admin token still works: %v", err)
	}
	srv.Close()

	logs := &logBuffer{}
	srv, err = Start(ctx, opts(testAdmin, logs))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := client.New(srv.URL, testAdmin).ListTokens(ctx, client.TokenScope{}); !client.IsUnauthorized(err) {
		t.Fatalf("a restart brought the rotated-away admin token back: %v", err)
	}
	if !strings.Contains(logs.String(), "not an active operator token") {
		t.Errorf("no warning about the stale admin token:\n%s", logs)
	}
	if _, err := client.New(srv.URL, next.Token).ListProjects(ctx); err != nil {
		t.Fatalf("the rotated admin token: %v", err)
	}
}

// TestOperatorTokenBootstrapOnTheWallClock: tokens expire on the wall
// clock, so a server whose clock runs ahead (--speed) must not read the
// operators' token, good for two more days, as expired at a restart and
// let a new configured admin token in.
func TestOperatorTokenBootstrapOnTheWallClock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(token string) Options {
		return Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: token, Speed: 100, ConfigPath: filepath.Join(dir, "cli.yaml")}
	}
	srv, err := Start(ctx, opts(testAdmin))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL, testAdmin)
	list, err := c.ListTokens(ctx, client.TokenScope{})
	if err != nil || len(list.Tokens) != 1 {
		t.Fatalf("operator tokens: %+v, %v", list, err)
	}
	if _, err := c.NewToken(ctx, client.TokenScope{}, apiv1.CreateTokenRequest{Name: "ops", ExpiresIn: "48h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeToken(ctx, client.TokenScope{}, list.Tokens[0].TokenID); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	// The server's clock a month ahead of the wall clock.
	now := time.Now()
	a, _ := json.Marshal(clock.Anchor{Speed: 100, Virtual: now.AddDate(0, 1, 0).UTC(), Real: now})
	if err := os.WriteFile(filepath.Join(dir, "clock.json"), a, 0o600); err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("b", 40)
	srv, err = Start(ctx, opts(other))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := client.New(srv.URL, other).ListTokens(ctx, client.TokenScope{}); !client.IsUnauthorized(err) {
		t.Fatalf("with the operators' token good for two more days, a new admin token got in: %v", err)
	}
}
