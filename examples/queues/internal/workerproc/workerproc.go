// Package workerproc runs a recipe as a tenant would: it builds the
// recipe's command, starts it as a process with its environment, reads
// its log lines as they come, sends it the notice (SIGTERM) and times its
// exit. The recipes' tests assert on the queues themselves; the log lines
// only tell them when the worker has taken an item.
package workerproc

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds the command in dir (with the race detector, as the tests
// run) into a temporary directory and returns its path.
func Build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command("go", "build", "-race", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// Proc is a running worker.
type Proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	more   chan struct{} // closed and replaced when a line comes or the output ends
	ended  bool
	exited chan struct{}
	err    error
	exitAt time.Time
}

// Start starts bin with the test's environment less sparecap's notice
// sources (so only the test gives the notice), plus env. The worker is
// killed when the test ends, if it is still running, and its output is
// logged if the test failed.
func Start(t *testing.T, bin string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPARECAP_") && !strings.HasPrefix(kv, "SLURMD_NODENAME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// No pod annotations or deadline file: the notice is the SIGTERM, with
	// SPARECAP_GRACE (set in env) until the deadline.
	cmd.Env = append(cmd.Env, "SPARECAP_ANNOTATIONS_FILE=-", "SPARECAP_DEADLINE_FILE=-")
	// A program built with -race waits a second at exit by default; the
	// tests time the exit.
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	p := &Proc{t: t, cmd: cmd, more: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.ended = true
		close(p.more)
		p.mu.Unlock()
	}()
	go func() {
		p.err = cmd.Wait()
		p.exitAt = time.Now()
		w.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", strings.Join(p.Lines(), "\n"))
		}
	})
	return p
}

// Lines returns the lines the worker printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLine waits until the worker prints a line that matches re (looking
// from the start of its output) and returns its submatches; it fails the
// test after timeout, or if the output ends first.
func (p *Proc) WaitLine(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if m := re.FindStringSubmatch(l); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		more, ended := p.more, p.ended
		p.mu.Unlock()
		if ended {
			p.t.Fatalf("the worker's output ended with no line matching %q", re)
		}
		select {
		case <-more:
		case <-ctx.Done():
			p.t.Fatalf("no line matching %q from the worker within %s", re, timeout)
		}
	}
}

// Notice sends the worker SIGTERM and returns when it was sent.
func (p *Proc) Notice() time.Time {
	p.t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	return at
}

// Exit waits until the worker exits, at most until by, and returns when
// it exited and its exit error (nil for status 0). It fails the test if
// the worker is still running at by.
func (p *Proc) Exit(by time.Time) (time.Time, error) {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.exitAt, p.err
	case <-time.After(time.Until(by)):
		p.t.Fatalf("the worker is still running at %s", by.Format(time.RFC3339Nano))
		return time.Time{}, nil
	}
}
