// Package slurmenv starts a real Slurm of its own on loopback for tests:
// a munged with its own key, one slurmctld and a slurmd per node, all
// Debian's 22.05 daemons (scripts/ensure-slurm.sh installs them). Nodes
// are dynamic, as sparecap's are on a tenant's Slurm: each joins with
// `slurmd -Z` in its own UTS and mount namespace, on its own loopback
// address (127.0.2.K), with fake GPU devices. Several Envs can run side by
// side, each with its own munge key. ../shared/slurm/NOTES.md section 5 has
// the facts this rests on.
package slurmenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure an Env.
type Options struct {
	// KillWait is slurm.conf's KillWait: SIGTERM to SIGKILL on a requeue
	// or a cancel (default 5 s, so tests do not wait 30).
	KillWait time.Duration
	// CredExpire is the munge credential window; a requeued job is held
	// until now+CredExpire+1 (default 10 s).
	CredExpire time.Duration
	// SlurmdTimeout: how long slurmctld waits before setting a silent
	// node DOWN (default 300 s, Slurm's own).
	SlurmdTimeout time.Duration
	// SchedInterval: how often slurmctld's scheduler tries all pending
	// jobs besides the events that start a pass (default 60 s, Slurm's
	// own). A long one shows what waits on the periodic pass.
	SchedInterval time.Duration
}

// Env is one Slurm: its directory, daemons and nodes.
type Env struct {
	Dir string
	// Conf is the slurm.conf the client commands use (SLURM_CONF).
	Conf string
	opts Options

	mu      sync.Mutex
	munged  *exec.Cmd
	ctld    *exec.Cmd
	nodes   map[string]*Node
	closed  bool
	ctlPort int
}

// Node is one slurmd the Env runs.
type Node struct {
	Name string
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// NodeSpec is a node to start.
type NodeSpec struct {
	Name string
	GPUs int
	// GPUType, if set, types its GPUs (gres gpu:TYPE:N).
	GPUType  string
	CPUs     int
	Features []string
}

// Start starts munged and slurmctld in a new directory and waits until
// slurmctld answers.
func Start(opts Options) (*Env, error) {
	if opts.KillWait == 0 {
		opts.KillWait = 5 * time.Second
	}
	if opts.CredExpire == 0 {
		opts.CredExpire = 10 * time.Second
	}
	if opts.SlurmdTimeout == 0 {
		opts.SlurmdTimeout = 300 * time.Second
	}
	if opts.SchedInterval == 0 {
		opts.SchedInterval = 60 * time.Second
	}
	dir, err := os.MkdirTemp("", "slurmenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, opts: opts, nodes: map[string]*Node{}}
	if err := e.start(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Env) start() error {
	for _, d := range []string{"munge", "state", "spool", "run", "log", "dev", "dyn"} {
		if err := os.MkdirAll(filepath.Join(e.Dir, d), 0o755); err != nil {
			return err
		}
	}
	// munged needs execute permission for all on every directory of its
	// socket's path.
	if err := os.Chmod(e.Dir, 0o755); err != nil {
		return err
	}
	if err := e.startMunge(); err != nil {
		return fmt.Errorf("munged: %w", err)
	}
	if err := e.writeConf(); err != nil {
		return err
	}
	if err := chownTo(filepath.Join(e.Dir, "state"), "slurm"); err != nil {
		return err
	}
	return e.StartController()
}

// StartController starts slurmctld (again, after StopController: it
// recovers its state) and waits until it answers.
func (e *Env) StartController() error {
	e.ctld = exec.Command("/usr/sbin/slurmctld", "-D", "-f", e.Conf)
	e.ctld.Stdout, e.ctld.Stderr = logFile(e.Dir, "slurmctld.out")
	e.ctld.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.ctld.Start(); err != nil {
		return fmt.Errorf("slurmctld: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := e.Run(context.Background(), "scontrol", "ping")
		if err == nil && strings.Contains(out, "UP") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurmctld did not answer in 30 s: %v %s; log: %s", err, out, e.tail("log/slurmctld.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopController stops slurmctld as a crash does (SIGKILL): the client
// commands get no answer until StartController.
func (e *Env) StopController() {
	if e.ctld != nil && e.ctld.Process != nil {
		syscall.Kill(-e.ctld.Process.Pid, syscall.SIGKILL)
		e.ctld.Wait()
	}
}

// MungeSocket is the socket of this Env's munged.
func (e *Env) MungeSocket() string { return filepath.Join(e.Dir, "munge", "munge.socket") }

func (e *Env) startMunge() error {
	m := filepath.Join(e.Dir, "munge")
	key := filepath.Join(m, "munge.key")
	if out, err := exec.Command("/usr/sbin/mungekey", "-c", "-k", key).CombinedOutput(); err != nil {
		return fmt.Errorf("mungekey: %v: %s", err, out)
	}
	if err := os.Chmod(key, 0o400); err != nil {
		return err
	}
	if err := chownTo(m, "munge"); err != nil {
		return err
	}
	if err := chownTo(key, "munge"); err != nil {
		return err
	}
	e.munged = exec.Command("runuser", "-u", "munge", "--", "/usr/sbin/munged", "--foreground",
		"--socket="+e.MungeSocket(), "--key-file="+key, "--pid-file="+filepath.Join(m, "munged.pid"),
		"--log-file="+filepath.Join(m, "munged.log"), "--seed-file="+filepath.Join(m, "munged.seed"))
	e.munged.Stdout, e.munged.Stderr = logFile(e.Dir, "munged.out")
	e.munged.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.munged.Start(); err != nil {
		return err
	}
	for range 100 {
		if _, err := os.Stat(e.MungeSocket()); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no socket after 5 s: %s", e.tail("munge/munged.log"))
}

func (e *Env) writeConf() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	e.ctlPort = ports[0]
	e.Conf = filepath.Join(e.Dir, "slurm.conf")
	conf := fmt.Sprintf(confTemplate, filepath.Base(e.Dir), ports[0], ports[1], e.Dir, e.MungeSocket(),
		int(e.opts.CredExpire.Seconds()), int(e.opts.KillWait.Seconds()), int(e.opts.SlurmdTimeout.Seconds()), int(e.opts.SchedInterval.Seconds()))
	if err := os.WriteFile(e.Conf, []byte(conf), 0o644); err != nil {
		return err
	}
	// slurmd and the jobs' srun read dyn/slurm.conf: NoInAddrAny makes
	// each slurmd bind its own address, and the TaskProlog points a job's
	// srun at job.conf, without it (the step connects back to 127.0.0.1).
	dyn := filepath.Join(e.Dir, "dyn")
	// Both confs' gres.conf (each daemon reads the one beside its conf).
	if err := os.WriteFile(filepath.Join(dyn, "gres.conf"), nil, 0o644); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(dyn, "gres.conf"), filepath.Join(e.Dir, "gres.conf")); err != nil {
		return err
	}
	job := strings.Replace(conf, "CommunicationParameters=NoInAddrAny\n", "", 1)
	if err := os.WriteFile(filepath.Join(dyn, "job.conf"), []byte(job), 0o644); err != nil {
		return err
	}
	prolog := filepath.Join(dyn, "taskprolog")
	if err := os.WriteFile(prolog, []byte("#!/bin/sh\necho export SLURM_CONF="+filepath.Join(dyn, "job.conf")+"\n"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dyn, "slurm.conf"), []byte(conf+"TaskProlog="+prolog+"\n"), 0o644)
}

// confTemplate: a single-host Slurm with dynamic nodes only, every node in
// the partition "main" and the ones with the feature preemptible also in
// "preemptible".
const confTemplate = `ClusterName=%[1]s
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[5]s,cred_expire=%[6]d
StateSaveLocation=%[4]s/state
SlurmdSpoolDir=%[4]s/spool/%%n
SlurmctldPidFile=%[4]s/run/slurmctld.pid
SlurmdPidFile=%[4]s/run/slurmd.%%n.pid
SlurmctldLogFile=%[4]s/log/slurmctld.log
SlurmdLogFile=%[4]s/log/slurmd.%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MaxNodeCount=128
KillWait=%[7]d
SlurmdTimeout=%[8]d
MinJobAge=300
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=%[9]d
MpiDefault=none
CommunicationParameters=NoInAddrAny
NodeSet=preemptible Feature=preemptible
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=preemptible Nodes=preemptible MaxTime=INFINITE State=UP
`

// Run runs a Slurm client command against this Env and returns its
// combined output.
func (e *Env) Run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.Conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// addrs hands out loopback addresses to nodes of every Env in the
// process: two nodes never share one.
var addrs struct {
	sync.Mutex
	used map[string]bool
}

func takeAddr() (string, error) {
	addrs.Lock()
	defer addrs.Unlock()
	if addrs.used == nil {
		addrs.used = map[string]bool{}
	}
	for k := 1; k < 250*250; k++ {
		a := fmt.Sprintf("127.2.%d.%d", k/250, k%250+1)
		if !addrs.used[a] {
			addrs.used[a] = true
			return a, nil
		}
	}
	return "", errors.New("no loopback address left")
}

func freeAddr(a string) {
	addrs.Lock()
	defer addrs.Unlock()
	delete(addrs.used, a)
}

// StartNode does what a machine's boot does: creates the node's record
// as a future node on its own address, then starts its slurmd -Z, which
// registers it. The node is idle a moment later.
func (e *Env) StartNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	e.mu.Lock()
	if _, ok := e.nodes[spec.Name]; ok {
		e.mu.Unlock()
		return nil, fmt.Errorf("node %s already runs", spec.Name)
	}
	e.mu.Unlock()
	if spec.CPUs == 0 {
		spec.CPUs = 2
	}
	addr, err := takeAddr()
	if err != nil {
		return nil, err
	}
	n := &Node{Name: spec.Name, Addr: addr, done: make(chan struct{})}
	if err := e.startNode(ctx, n, spec); err != nil {
		freeAddr(addr)
		return nil, err
	}
	e.mu.Lock()
	e.nodes[spec.Name] = n
	e.mu.Unlock()
	return n, nil
}

func (e *Env) startNode(ctx context.Context, n *Node, spec NodeSpec) error {
	conf := NodeConf(spec)
	if err := e.fakeGPUs(spec); err != nil {
		return err
	}
	args := []string{"create", "NodeName=" + n.Name, "NodeAddr=" + n.Addr, "NodeHostname=" + n.Name, "State=FUTURE"}
	args = append(args, strings.Fields(conf)...)
	if _, err := e.Run(ctx, "scontrol", args...); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(e.Dir, "spool", n.Name), 0o755); err != nil {
		return err
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	hostsFile := filepath.Join(e.Dir, "dyn", "hosts."+n.Name)
	hosts = append(hosts, []byte(fmt.Sprintf("\n%s %s\n", n.Addr, n.Name))...)
	if err := os.WriteFile(hostsFile, hosts, 0o644); err != nil {
		return err
	}
	script := fmt.Sprintf(`mount --bind %s /etc/hosts && hostname %s && exec /usr/sbin/slurmd -D -f %s -Z -N %s --conf %q`,
		hostsFile, n.Name, filepath.Join(e.Dir, "dyn", "slurm.conf"), n.Name, conf)
	n.cmd = exec.Command("unshare", "--uts", "--mount", "sh", "-c", script)
	n.cmd.Stdout, n.cmd.Stderr = logFile(e.Dir, "slurmd."+n.Name+".out")
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	go func() { n.cmd.Wait(); close(n.done) }()
	return nil
}

// NodeConf is the node's --conf line for slurmd -Z (what the machine
// provider's hook is told as well).
func NodeConf(spec NodeSpec) string {
	cpus := spec.CPUs
	if cpus == 0 {
		cpus = 2
	}
	gres := fmt.Sprintf("gpu:%d", spec.GPUs)
	if spec.GPUType != "" {
		gres = fmt.Sprintf("gpu:%s:%d", spec.GPUType, spec.GPUs)
	}
	s := fmt.Sprintf("CPUs=%d RealMemory=1000 Gres=%s", cpus, gres)
	if len(spec.Features) > 0 {
		s += " Feature=" + strings.Join(spec.Features, ",")
	}
	return s
}

// fakeGPUs makes the node's GPU device files (character devices, as
// /dev/null) and names them in gres.conf before its slurmd reads it.
func (e *Env) fakeGPUs(spec NodeSpec) error {
	if spec.GPUs == 0 {
		return nil
	}
	dev := filepath.Join(e.Dir, "dev", spec.Name)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	for i := range spec.GPUs {
		p := filepath.Join(dev, fmt.Sprintf("gpu%d", i))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(1<<8|3)); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(e.Dir, "dyn", "gres.conf"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	typ := ""
	if spec.GPUType != "" {
		typ = " Type=" + spec.GPUType
	}
	_, err = fmt.Fprintf(f, "NodeName=%s Name=gpu%s File=%s/gpu[0-%d]\n", spec.Name, typ, dev, spec.GPUs-1)
	return err
}

// StopNode stops the node's slurmd as a machine that goes away does: at
// once, without telling slurmctld. Its record stays.
func (e *Env) StopNode(name string) {
	e.mu.Lock()
	n, ok := e.nodes[name]
	delete(e.nodes, name)
	e.mu.Unlock()
	if !ok {
		return
	}
	stop(n.cmd, n.done)
	freeAddr(n.Addr)
}

// Nodes lists the nodes whose slurmd runs.
func (e *Env) Nodes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for n := range e.nodes {
		out = append(out, n)
	}
	return out
}

// Close stops the jobs, then the slurmds, slurmctld and munged (in that
// order: a slurmctld stopped first leaves slurmds retrying), and removes
// the directory.
func (e *Env) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	if e.ctld != nil {
		e.Run(context.Background(), "scancel", "--full", "--signal=KILL", "-u", "root")
	}
	for _, n := range e.Nodes() {
		e.StopNode(n)
	}
	if e.ctld != nil {
		stop(e.ctld, nil)
	}
	if e.munged != nil {
		stop(e.munged, nil)
	}
	if os.Getenv("SLURMENV_KEEP") == "" {
		os.RemoveAll(e.Dir)
	}
}

// stop ends a process group: SIGTERM, SIGKILL after 5 s.
func stop(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	if done == nil {
		done = make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (e *Env) tail(rel string) string {
	b, _ := os.ReadFile(filepath.Join(e.Dir, rel))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func logFile(dir, name string) (*os.File, *os.File) {
	f, err := os.Create(filepath.Join(dir, "log", name))
	if err != nil {
		return nil, nil
	}
	return f, f
}

func chownTo(path, user string) error {
	out, err := exec.Command("chown", "-R", user+":"+user, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chown %s: %v: %s", path, err, out)
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
