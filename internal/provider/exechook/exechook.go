// Package exechook implements driver.MachineProvider by running a program
// the operator supplies, in the manner of Slurm's ResumeProgram and
// SuspendProgram: sparecap decides which machine serves which cluster, the
// program does whatever the site needs to turn a machine into a node of
// that cluster (image it, join it to Kubernetes) and to wipe it afterwards.
//
// # Invocation
//
// To prepare a machine for a node the program is run as
//
//	PROGRAM [ARGS...] provision <machine-id> <cluster-id> <node-name>
//
// and to wipe it after the node is gone as
//
//	PROGRAM [ARGS...] deprovision <machine-id> <cluster-id> <node-name>
//
// where ARGS are Config.Args. The cluster ID of a deprovision is the
// cluster the node belonged to.
//
// The environment is minimal, not sparecap's own: the server's holds its
// admin token and whatever else it was started with, none of which is the
// hook's business. A hook gets PATH (a standard one if the server has
// none), then HOME, LANG, LC_ALL, TZ and TMPDIR when the server has them,
// then Config.Env (the operator's explicit extras), then
//
//	SPARECAP_ACTION       provision or deprovision
//	SPARECAP_MACHINE_ID   the machine ID
//	SPARECAP_CLUSTER_ID   the cluster ID
//	SPARECAP_NODE_NAME    the Kubernetes node name
//
// where a later entry overrides an earlier one of the same name, so
// Config.Env cannot change the SPARECAP_ variables. Nothing else is passed:
// a hook that needs credentials gets them through Config.Env or reads them
// itself.
//
// Standard input holds one JSON document (snake_case keys), for example:
//
//	{
//	  "action": "provision",
//	  "machine": {"id": "m-17", "region": "us-east", "gpu_type": "H100",
//	              "gpus": 8, "reservation_id": ""},
//	  "cluster_id": "c-4",
//	  "platform": "KUBERNETES",
//	  "node": {"name": "gpu-preemptible-dp-3", "class": "preemptible",
//	           "gpus": 8, "labels": {"sparecap.dev/compute-class": "preemptible"}}
//	}
//
// For a SLURM cluster, platform is "SLURM" and node.slurm says how the
// machine joins: it starts `slurmd -Z -N <node.name> --conf
// "<slurmd_conf>"` against the tenant's slurmctld, which registers it as
// a dynamic node with the features sparecap and its class:
//
//	"node": {"name": "gpu-preemptible-dp-3", "class": "preemptible", "gpus": 8,
//	         "slurm": {"features": "sparecap,preemptible",
//	                   "slurmd_conf": "Gres=gpu:8 Feature=sparecap,preemptible"}}
//
// reservation_id is empty for the on-demand pool. A deprovision carries
// only node.name (class, gpus and labels are omitted) and cluster_id. Hooks should ignore keys they do not know: more may be added.
//
// # Result
//
// A hook succeeds when it exits with status 0 and prints a single JSON
// object on standard output; {} will do. An optional string field
// "message" is logged. Anything else is a failure, and the error, which
// the controller keeps on the node and retries with backoff, says why:
//
//	provision hook /usr/local/bin/hook exited with status 3: <last non-empty line of stderr>
//	provision hook /usr/local/bin/hook printed malformed output (want a JSON object on stdout): <start of stdout>
//	provision hook /usr/local/bin/hook timed out after 10m0s
//
// Standard error is otherwise unused, so it is the place for diagnostics;
// its last line should explain a failure. Each of stdout and stderr is
// captured up to 64 KiB (stdout's head, stderr's tail).
//
// A hook runs in its own process group. When it exceeds Config.Timeout
// (10 minutes by default), or the provider is closed, the whole group is
// killed with SIGKILL, so a hook's children go with it. A hook that exits
// by itself may leave background processes running, but they must not keep
// its stdout or stderr open: the result is read once both are closed, or
// at most a few seconds after the hook exited.
//
// # Polling and idempotency
//
// Prepare and Wipe are polled by the controller. The first call for an
// (action, machine, node, and for provision cluster) starts the hook in
// the background and returns (false, nil); later calls return (false, nil)
// while it runs, then (true, nil) once it has succeeded or its error once
// it has failed. A success stays: every later call for the same action and
// node reports it again and runs nothing (the controller asks Prepare again
// on each turn until the node registers) until another hook starts on that
// machine. A failure is reported once and then forgotten, so the next call
// after it runs the hook again. At most one hook runs per machine: a call
// for a different action or node waits (returns false) until the running
// hook has finished, and the result of the last one is dropped when
// another hook starts on that machine.
//
// Hooks must be idempotent. The controller records its intent before
// acting, so after a crash, or after a run that failed halfway, it calls
// provision again for a machine that may be provisioned already and
// deprovision for one that may be wiped already; both must then succeed
// without doing the work twice.
package exechook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/slurm"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

var _ driver.MachineProvider = (*Provider)(nil)

const (
	// DefaultTimeout bounds a hook run when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Minute
	// outputCap bounds what is kept of a hook's stdout and of its stderr.
	outputCap = 64 << 10
	// waitDelay is how long output pipes may stay open after the hook
	// exited (a background child holding them) before they are closed.
	waitDelay = 5 * time.Second
)

// Actions, passed as the first argument after Config.Args.
const (
	ActionProvision   = "provision"
	ActionDeprovision = "deprovision"
)

// ErrClosed is returned by Prepare and Wipe after Close.
var ErrClosed = errors.New("exechook: provider closed")

// Config configures a Provider.
type Config struct {
	// Program is a path, or a bare name looked up in $PATH.
	Program string
	// Args go before the action and its arguments.
	Args []string
	// Timeout of one hook run; zero means DefaultTimeout.
	Timeout time.Duration
	// Log receives a line per hook run; nil discards.
	Log *slog.Logger
	// Env holds extra KEY=value entries for the hook's environment, which
	// otherwise holds only the few variables the package comment lists.
	Env []string
	// Clock times the hook runs logged: wall time (default clock.Real{}).
	Clock clock.Clock
}

// inherited names the variables of the server's environment a hook gets,
// if they are set; PATH gets defaultPath if it is not.
var inherited = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// defaultPath is a hook's PATH when the server has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Provider is a driver.MachineProvider that runs an exec hook. It is safe
// for concurrent use.
type Provider struct {
	program string
	args    []string
	timeout time.Duration
	log     *slog.Logger
	env     []string
	clock   clock.Clock

	// ctx is the hooks' context: a caller's ctx ends with its poll, so
	// hooks live until Close instead.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// jobs holds each machine's running hook run, or its last one while
	// it succeeded or its failure is unreported.
	jobs map[string]*job
}

type key struct {
	action, node, cluster string
}

type job struct {
	key      key
	finished bool
	err      error
}

// New checks that the program exists and is executable and returns a
// Provider for it. Close it to stop running hooks.
func New(cfg Config) (*Provider, error) {
	if cfg.Program == "" {
		return nil, errors.New("exechook: no program configured")
	}
	path, err := exec.LookPath(cfg.Program)
	if err != nil {
		return nil, fmt.Errorf("exechook: %w", err)
	}
	// Absolute, so the hook stays the same if the working directory changes.
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("exechook: %w", err)
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("exechook: environment entry %q: want KEY=VALUE", kv)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{
		program: path,
		args:    append([]string(nil), cfg.Args...),
		timeout: cfg.Timeout,
		log:     cfg.Log,
		env:     append([]string(nil), cfg.Env...),
		clock:   cfg.Clock,
		ctx:     ctx,
		cancel:  cancel,
		jobs:    map[string]*job{},
	}, nil
}

// Prepare runs the provision hook for the node; see the package comment.
func (p *Provider) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	req := request{
		Action:    ActionProvision,
		Machine:   machineOf(m),
		ClusterID: spec.ClusterID,
		Platform:  string(spec.Platform),
		Node:      node{Name: spec.NodeName, Class: string(spec.Class), GPUs: spec.GPUs, Labels: spec.Labels},
	}
	if spec.Platform == domain.ClusterSlurm {
		req.Node.Slurm = &slurmNode{Features: strings.Join(slurm.NodeFeatures(spec.ClusterID, spec.Class), ","), SlurmdConf: slurm.NodeConf(spec, 0, 0)}
	}
	return p.poll(ctx, m.ID, key{ActionProvision, spec.NodeName, spec.ClusterID}, req)
}

// Wipe runs the deprovision hook for the node; see the package comment.
func (p *Provider) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	req := request{Action: ActionDeprovision, Machine: machineOf(m), ClusterID: clusterID, Node: node{Name: nodeName}}
	return p.poll(ctx, m.ID, key{action: ActionDeprovision, node: nodeName, cluster: clusterID}, req)
}

// poll reports the result of the machine's run for k, or starts one with
// req as the hook's input.
func (p *Provider) poll(ctx context.Context, machineID string, k key, req request) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if machineID == "" {
		return false, fmt.Errorf("exechook: %s: machine has no ID", k.action)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, ErrClosed
	}
	if j := p.jobs[machineID]; j != nil {
		switch {
		case j.key == k && !j.finished:
			return false, nil
		case j.key == k && j.err != nil:
			// Reported once: the next call runs the hook again.
			delete(p.jobs, machineID)
			return false, j.err
		case j.key == k:
			return true, nil
		case !j.finished:
			// Another hook is busy on this machine; ours starts after it.
			return false, nil
		}
		// A finished run for another key: the controller has moved on,
		// so it is dropped below.
	}
	j := &job{key: k}
	p.jobs[machineID] = j
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := p.run(req)
		p.mu.Lock()
		j.finished, j.err = true, err
		p.mu.Unlock()
	}()
	return false, nil
}

// Close kills running hooks, waits for them to exit and makes later calls
// fail with ErrClosed. It is safe to call more than once.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// run runs the hook once and returns its error.
func (p *Provider) run(req request) error {
	input, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("exechook: encode input: %w", err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()

	args := append(append([]string(nil), p.args...), req.Action, req.Machine.ID, req.ClusterID, req.Node.Name)
	cmd := exec.CommandContext(ctx, p.program, args...)
	cmd.Env = append(append(baseEnv(), p.env...),
		"SPARECAP_ACTION="+req.Action,
		"SPARECAP_MACHINE_ID="+req.Machine.ID,
		"SPARECAP_CLUSTER_ID="+req.ClusterID,
		"SPARECAP_NODE_NAME="+req.Node.Name,
	)
	cmd.Stdin = bytes.NewReader(input)
	stdout, stderr := &capped{}, &capped{tail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process group of its own, so a timeout kills the hook's children
	// too instead of leaving them running with no one to wait for them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay

	log := p.log.With("action", req.Action, "machine", req.Machine.ID, "cluster", req.ClusterID, "node", req.Node.Name)
	log.Debug("exec hook starting", "program", p.program)
	start := p.clock.Now()
	err = p.result(ctx, req.Action, cmd.Run(), stdout, stderr, log)
	if err != nil {
		log.Warn("exec hook failed", "duration", p.clock.Now().Sub(start), "err", err)
	}
	return err
}

// baseEnv returns the part of the server's environment a hook gets: the
// inherited variables that are set, and PATH in any case.
func baseEnv() []string {
	env := make([]string, 0, len(inherited))
	for _, k := range inherited {
		v, ok := os.LookupEnv(k)
		if k == "PATH" && v == "" {
			v, ok = defaultPath, true
		}
		if ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// result turns how the hook ended into its error, logging its message on
// success.
func (p *Provider) result(ctx context.Context, action string, runErr error, stdout, stderr *capped, log *slog.Logger) error {
	what := fmt.Sprintf("%s hook %s", action, p.program)
	var exitErr *exec.ExitError
	switch {
	case runErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s timed out after %s", what, p.timeout)
	case runErr != nil && p.ctx.Err() != nil:
		return fmt.Errorf("%s killed: %w", what, ErrClosed)
	case errors.As(runErr, &exitErr):
		var how string
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "was killed by signal " + ws.Signal().String()
		} else {
			how = fmt.Sprintf("exited with status %d", exitErr.ExitCode())
		}
		if line := lastLine(stderr.Bytes()); line != "" {
			return fmt.Errorf("%s %s: %s", what, how, line)
		}
		return fmt.Errorf("%s %s", what, how)
	case errors.Is(runErr, exec.ErrWaitDelay):
		// Exited 0 but a leftover child held its output open; the output
		// read so far is judged as usual.
		log.Warn("exec hook left a process holding its output open")
	case runErr != nil:
		return fmt.Errorf("%s could not run: %w", what, runErr)
	}
	out := bytes.TrimSpace(stdout.Bytes())
	var res struct {
		Message string `json:"message"`
	}
	// The prefix check rejects null, which Unmarshal accepts; Unmarshal
	// rejects arrays, other values and anything after the object.
	if !bytes.HasPrefix(out, []byte("{")) || json.Unmarshal(out, &res) != nil {
		return fmt.Errorf("%s printed malformed output (want a JSON object on stdout): %s", what, truncate(string(out), 200))
	}
	log.Info("exec hook succeeded", "message", res.Message)
	return nil
}

// request is the JSON document on the hook's stdin.
type request struct {
	Action    string  `json:"action"`
	Machine   machine `json:"machine"`
	ClusterID string  `json:"cluster_id"`
	// Platform is the cluster's type, KUBERNETES or SLURM (provision).
	Platform string `json:"platform,omitempty"`
	Node     node   `json:"node"`
}

type machine struct {
	ID            string `json:"id"`
	Region        string `json:"region"`
	GPUType       string `json:"gpu_type"`
	GPUs          int    `json:"gpus"`
	ReservationID string `json:"reservation_id"`
}

type node struct {
	Name   string            `json:"name"`
	Class  string            `json:"class,omitempty"`
	GPUs   int               `json:"gpus,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Slurm is what a SLURM cluster's machine needs to start its slurmd.
	Slurm *slurmNode `json:"slurm,omitempty"`
}

// slurmNode: the machine joins with `slurmd -Z -N NAME --conf SLURMD_CONF`
// (against the tenant's slurmctld, configless or with its slurm.conf).
type slurmNode struct {
	Features   string `json:"features"`
	SlurmdConf string `json:"slurmd_conf"`
}

func machineOf(m domain.Machine) machine {
	return machine{ID: m.ID, Region: m.Region, GPUType: m.GPUType, GPUs: m.GPUs, ReservationID: m.ReservationID}
}

// capped keeps the first (or, with tail, the last) outputCap bytes written
// to it. It never fails a write: an error would make the copy stop and the
// hook block on, or die of, a full pipe.
type capped struct {
	tail bool
	buf  []byte
}

func (c *capped) Write(b []byte) (int, error) {
	if c.tail {
		c.buf = append(c.buf, b...)
		if len(c.buf) > outputCap {
			c.buf = c.buf[len(c.buf)-outputCap:]
		}
	} else if room := outputCap - len(c.buf); room > 0 {
		c.buf = append(c.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (c *capped) Bytes() []byte { return c.buf }

// lastLine returns the last non-blank line of b, trimmed and truncated.
func lastLine(b []byte) string {
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return truncate(l, 300)
		}
	}
	return ""
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
