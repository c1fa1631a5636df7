package scalebench

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// AdminToken is the admin token the server gets in SPARECAP_ADMIN_TOKEN.
const AdminToken = "sc_scalebench_admin_0123456789abcdef"

// LogName is the server log's file name in the data directory.
const LogName = "server.log"

// Server is one `sparecap server` process.
type Server struct {
	URL     string
	LogPath string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	err     error // of Wait, once exited is closed
	Started time.Time
	// Ready is how long it took from exec to /readyz answering 200.
	Ready time.Duration
}

// Pid of the server process.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// StartServer execs binary with `server` and args (plus --addr, a free
// port), its output to <dataDir>/server.log, and waits up to timeout for
// /healthz and /readyz.
func StartServer(ctx context.Context, binary, dataDir string, args []string, timeout time.Duration) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		s, err := startOnce(ctx, binary, dataDir, addr, args, timeout)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, binary, dataDir, addr string, args []string, timeout time.Duration) (*Server, error) {
	logPath := filepath.Join(dataDir, LogName)
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	full := append([]string{"server", "--addr", addr, "--data-dir", dataDir}, args...)
	fmt.Fprintf(lf, "==== %s %s\n", binary, strings.Join(full, " "))
	cmd := exec.Command(binary, full...)
	cmd.Env = append(cleanEnv(), "SPARECAP_ADMIN_TOKEN="+AdminToken,
		// The server writes the CLI config on first start: keep it out
		// of the user's home.
		"SPARECAP_CONFIG="+filepath.Join(dataDir, "cli-config.yaml"))
	cmd.Stdout, cmd.Stderr = lf, lf
	s := &Server{URL: "http://" + addr, LogPath: logPath, cmd: cmd, log: lf, exited: make(chan struct{}), Started: time.Now()}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("exec %s: %w", binary, err)
	}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	c := newClient(s.URL, 5*time.Second)
	defer c.close()
	deadline := time.Now().Add(timeout)
	for _, path := range []string{"/healthz", "/readyz"} {
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.do(rctx, "GET", path, "", nil, nil)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-s.exited:
				lf.Close()
				return nil, fmt.Errorf("server exited before %s answered (%v); log %s:\n%s", path, s.err, logPath, Tail(logPath, 40))
			case <-ctx.Done():
				s.Kill()
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				s.Kill()
				return nil, fmt.Errorf("server at %s: %s not 200 after %s (last error: %v); log %s:\n%s", s.URL, path, timeout, err, logPath, Tail(logPath, 40))
			}
		}
	}
	s.Ready = time.Since(s.Started)
	return s, nil
}

// Exited says whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout for the exit, then SIGKILLs.
// It returns how long the exit took and the exit error, if any.
func (s *Server) Stop(timeout time.Duration) (time.Duration, error) {
	defer s.log.Close()
	if s.Exited() {
		return 0, fmt.Errorf("server had already exited: %v", s.err)
	}
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return time.Since(start), s.err
	case <-time.After(timeout):
		s.Kill()
		return time.Since(start), fmt.Errorf("no exit within %s of SIGTERM; killed", timeout)
	}
}

// Kill SIGKILLs the server if it runs and waits for it.
func (s *Server) Kill() {
	if s.Exited() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// cleanEnv is the environment without any SPARECAP_ variable, so neither
// the user's settings nor their config file leak into the server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPARECAP_") {
			env = append(env, kv)
		}
	}
	return env
}

// BuildBinary builds ./cmd/sparecap of the module at root into dir.
func BuildBinary(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "sparecap")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sparecap")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -o %s ./cmd/sparecap in %s: %v\n%s", bin, root, err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory holding go.mod at or above dir.
func ModuleRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

// GitDescribe names the source tree's revision, "" if git cannot.
func GitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// ---- PostgreSQL ----

// DefaultPostgres is the server the PostgreSQL runs use unless
// $SPARECAP_TEST_POSTGRES names another (as the store's tests do).
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresBase is the URL of the PostgreSQL server to create databases on.
func PostgresBase() string {
	if v := os.Getenv("SPARECAP_TEST_POSTGRES"); v != "" {
		return v
	}
	return DefaultPostgres
}

// TempDatabase is a database created for one run.
type TempDatabase struct {
	Name string
	// URL is the server's --db.
	URL  string
	base string
}

// CreateDatabase creates a fresh database scalebench_<random> on the
// server of base (a postgres:// URL).
func CreateDatabase(ctx context.Context, base string) (*TempDatabase, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("PostgreSQL URL %q: want postgres://user@host:port/db", base)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "scalebench_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s on %s: %w", name, u.Redacted(), err)
	}
	u2 := *u
	u2.Path = "/" + name
	return &TempDatabase{Name: name, URL: u2.String(), base: base}, nil
}

// Size is pg_database_size of the database, in bytes.
func (d *TempDatabase) Size(ctx context.Context) (int64, error) {
	db, err := sql.Open("pgx", d.base)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, "SELECT pg_database_size($1)", d.Name).Scan(&n)
	return n, err
}

// Drop drops the database, disconnecting whoever is still on it.
func (d *TempDatabase) Drop(ctx context.Context) error {
	db, err := sql.Open("pgx", d.base)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.Name+" WITH (FORCE)")
	return err
}
