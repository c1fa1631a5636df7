package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/termsafe"
)

// ErrUnreachable wraps the error of a command that could not reach
// slurmctld (it is down, refusing, or munge does not answer).
var ErrUnreachable = errors.New("slurmctld does not answer")

// runner runs the Slurm client commands against one cluster's slurmctld:
// each with the cluster's own slurm.conf (and so its own munge socket),
// bounded by a timeout, at most inFlight at once, and retried a few times
// when slurmctld did not answer.
type runner struct {
	conf     string
	timeout  time.Duration
	retries  int
	slots    chan struct{}
	bin      string // directory of the commands; "" = PATH
	sleepFor func(time.Duration) <-chan time.Time
}

func (r *runner) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var err error
	for try := 0; ; try++ {
		var out []byte
		out, err = r.once(ctx, name, args...)
		if err == nil || !errors.Is(err, ErrUnreachable) || try >= r.retries || ctx.Err() != nil {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-r.sleepFor(time.Duration(try+1) * 200 * time.Millisecond):
		}
	}
}

func (r *runner) once(ctx context.Context, name string, args ...string) ([]byte, error) {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.slots }()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	path := name
	if r.bin != "" {
		path = r.bin + "/" + name
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = commandEnv(r.conf)
	// A process group of its own, so a timeout also kills the children of
	// a site's wrapper script, which would hold the output open; the wait
	// for the output is bounded all the same.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	// The whole output is matched; one line of it is told (see oneLine).
	out := stderr.String() + " " + stdout.String()
	line := oneLine(stderr.String(), stdout.String())
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s %s: no answer in %s: %w", name, strings.Join(args, " "), r.timeout, ErrUnreachable)
	}
	if unreachable(out) {
		return nil, fmt.Errorf("%s %s: %s: %w", name, strings.Join(args, " "), line, ErrUnreachable)
	}
	return stdout.Bytes(), &cmdError{cmd: name + " " + strings.Join(args, " "), msg: line, out: out}
}

// safePath is the commands' PATH: they run nothing of their own, and
// nothing of the server's environment.
const safePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// commandEnv is all a Slurm command gets of an environment: its
// slurm.conf and a fixed PATH and locale. The server's environment holds
// its secrets (SPARECAP_ADMIN_TOKEN, PGPASSWORD, ...) and may hold
// SLURM_* or SQUEUE_* variables that would change what the commands do.
func commandEnv(conf string) []string {
	return []string{"PATH=" + safePath, "SLURM_CONF=" + conf, "LC_ALL=C"}
}

// maxLine bounds the line of a command's output an error tells.
const maxLine = 300

// oneLine is what an error tells of a failed command's output: its first
// line on stderr (else on stdout), its control characters escaped, at
// most maxLine bytes. The rest is never told: Slurm quotes the lines of a
// file it cannot parse. munge's advice to restart munged with more
// threads, which comes before what went wrong, is passed over.
func oneLine(stderr, stdout string) string {
	for _, text := range []string{stderr, stdout} {
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.Contains(l, "If munged is up, restart with --num-threads") {
				continue
			}
			return bound.Text(termsafe.Escape(l), maxLine)
		}
	}
	return "(no output)"
}

// cmdError is a command slurmctld answered with a refusal.
type cmdError struct {
	cmd, msg string
	out      string // the whole output, matched by says, never told
}

func (e *cmdError) Error() string { return e.cmd + ": " + e.msg }

// says reports whether err is a refusal whose output contains s.
func says(err error, s string) bool {
	var ce *cmdError
	return errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.out), strings.ToLower(s))
}

// unreachable: the messages of a client that did not get an answer.
func unreachable(msg string) bool {
	for _, s := range []string{"Unable to contact slurm controller", "Socket timed out", "Connection refused",
		"Communication connection failure", "Zero Bytes were transmitted", "Munge encode failed", "munge",
		"Unable to establish", "Could not establish a configuration source"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
