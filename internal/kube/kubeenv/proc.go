package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one running component (etcd, kube-apiserver, or one of the mini
// cluster's).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and its output is drained
	tail *tail
	log  io.Closer // the component's log file, if it writes one; closed on exit
}

func startProc(name, path string, args []string, out io.Writer, logFile io.Closer) (*proc, error) {
	return startProcEnv(name, path, args, nil, out, logFile)
}

// startProcEnv is startProc with variables added to the environment.
func startProcEnv(name, path string, args, env []string, out io.Writer, logFile io.Closer) (*proc, error) {
	p := &proc{name: name, done: make(chan struct{}), tail: &tail{}, log: logFile}
	p.cmd = exec.Command(path, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	w := io.MultiWriter(out, p.tail)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	// Own process group, so stop reaches anything it forks; Pdeathsig so a
	// test binary that dies (timeout panic, SIGKILL) does not leave etcd or
	// kube-apiserver running. Pdeathsig fires when the forking OS thread
	// exits; Go only retires threads whose goroutine exits while locked to
	// them, which nothing here does.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Bound the wait for output copying should a grandchild hold the pipe.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("kubeenv: starting %s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		if p.log != nil {
			p.log.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL if it lingers.
// kube-apiserver drains in about a second with the default flags.
func (p *proc) stop() error {
	pid := p.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kubeenv: %s (pid %d) survived SIGKILL", p.name, pid)
	}
}

// waitReady polls check until it succeeds, the process exits or timeout
// passes; the errors carry the end of the component's log, which is where
// the reason is.
func (p *proc) waitReady(timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = check(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("kubeenv: %s exited during startup (%v)%s", p.name, p.cmd.ProcessState, p.tail.report())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeenv: %s not ready after %v: %v%s", p.name, timeout, last, p.tail.report())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) addrInUse() bool {
	return p.exited() && strings.Contains(p.tail.String(), "address already in use")
}

// tail keeps the last bytes a component wrote, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 16 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// report returns the last 30 lines, formatted to be appended to an error.
func (t *tail) report() string {
	lines := strings.Split(strings.TrimRight(t.String(), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\n--- last lines of its log ---\n" + strings.Join(lines, "\n")
}

// prefixWriter writes whole lines, each prefixed, to a writer shared by
// all components, so their logs interleave by line rather than by chunk.
type prefixWriter struct {
	prefix string
	shared *lockedWriter
	mu     sync.Mutex
	part   []byte
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexByte(p.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.shared.mu.Lock()
		_, err := fmt.Fprintf(p.shared.w, "%s%s\n", p.prefix, p.part[:i])
		p.shared.mu.Unlock()
		p.part = p.part[i+1:]
		if err != nil {
			// A broken log sink must not block the component on a full pipe.
			return len(b), nil
		}
	}
}

// freePort asks the kernel for an unused loopback port. Another process
// may take it before the component binds it; callers retry on
// "address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.New("kubeenv: " + err.Error())
	}
	return f, nil
}

// owns checks that the process itself listens on every one of ports: a
// port picked by freePort may have been taken by another process before
// the component bound it, and a component may report ready on one port
// (health) before it binds another (metrics), then exit when that bind
// fails. Linux only: it matches the listening sockets of /proc/net/tcp
// and tcp6 with the process's open sockets.
func (p *proc) owns(ports []int) error {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("%s's sockets: %w", p.name, err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.cmd.Process.Pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			mine[strings.TrimSuffix(inode, "]")] = true
		}
	}
	bound := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !mine[f[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			var port int
			if _, err := fmt.Sscanf(hexPort, "%X", &port); err == nil {
				bound[port] = true
			}
		}
	}
	for _, port := range ports {
		if !bound[port] {
			return fmt.Errorf("%s does not listen on port %d yet", p.name, port)
		}
	}
	return nil
}
