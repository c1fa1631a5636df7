package preempt

import (
	"bufio"
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The environment `sparecap run` gives its command, and the SDKs read.
const (
	// EnvDeadline is the deadline (RFC 3339), when it is known as the
	// command starts (a pod started on a node already draining).
	EnvDeadline = "SPARECAP_DEADLINE"
	// EnvDeadlineFile names a file that holds the deadline (RFC 3339) once
	// it is known, and is empty before.
	EnvDeadlineFile = "SPARECAP_DEADLINE_FILE"
	// EnvAnnotationsFile names the Downward API file of the pod's
	// annotations (default DefaultAnnotationsFile).
	EnvAnnotationsFile = "SPARECAP_ANNOTATIONS_FILE"
	// EnvCheckpointDir is where checkpoints go (a volume that outlives the
	// pod).
	EnvCheckpointDir = "SPARECAP_CHECKPOINT_DIR"
	// EnvCheckpointInterval is the recommended checkpoint interval (a Go
	// duration).
	EnvCheckpointInterval = "SPARECAP_CHECKPOINT_INTERVAL"
	// EnvPreemptionRate is the pool's preemption rate, percent of nodes an
	// hour, as the API measured it: with the store's measured save time
	// the job works its own interval out (the SDKs' Schedule).
	EnvPreemptionRate = "SPARECAP_PREEMPTION_RATE"
	// EnvCheckpointSignal names the signal `sparecap run` sends to ask for
	// a checkpoint now (default SIGUSR1).
	EnvCheckpointSignal = "SPARECAP_CHECKPOINT_SIGNAL"
	// EnvResumeFrom is the latest complete checkpoint's directory, when
	// there is one.
	EnvResumeFrom = "SPARECAP_RESUME_FROM"
	// EnvGrace is how long the command has after SIGTERM when no deadline
	// is known (a Go duration; default 30s, Kubernetes' default grace).
	EnvGrace = "SPARECAP_GRACE"
)

// AnnotationDeadline is the pod annotation that carries the deadline.
const AnnotationDeadline = "sparecap.dev/preempt-deadline"

// DefaultAnnotationsFile is where docs/workloads.md mounts the pod's
// annotations.
const DefaultAnnotationsFile = "/etc/podinfo/annotations"

// Notice is the news that the node is being reclaimed.
type Notice struct {
	// Deadline is when the pod is killed at the latest.
	Deadline time.Time
	// Source says where the notice came from: "environment",
	// "deadline-file", "annotation" or the signal's name.
	Source string
}

// Options say where Watch looks; zero values take the environment's.
type Options struct {
	// AnnotationsFile, DeadlineFile: as EnvAnnotationsFile and
	// EnvDeadlineFile ("-" turns one off).
	AnnotationsFile, DeadlineFile string
	// Grace is the time left after a signal when no file says the
	// deadline (default EnvGrace, else 30s).
	Grace time.Duration
	// Signals that bring the notice (default SIGTERM and the checkpoint
	// signal, EnvCheckpointSignal or SIGUSR1). Watch takes them over.
	Signals []os.Signal
	// Poll is how often the files are read (default 250ms).
	Poll time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

func (o Options) defaults() Options {
	env := func(v *string, name, def string) {
		if *v == "" {
			*v = os.Getenv(name)
		}
		if *v == "" {
			*v = def
		}
	}
	env(&o.AnnotationsFile, EnvAnnotationsFile, DefaultAnnotationsFile)
	env(&o.DeadlineFile, EnvDeadlineFile, "-")
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
		if d, err := time.ParseDuration(os.Getenv(EnvGrace)); err == nil && d > 0 {
			o.Grace = d
		}
	}
	if o.Signals == nil {
		o.Signals = []os.Signal{syscall.SIGTERM, CheckpointSignal()}
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// CheckpointSignal is the signal that asks for a checkpoint now:
// EnvCheckpointSignal (a name such as USR1 or SIGUSR2), else SIGUSR1.
func CheckpointSignal() syscall.Signal {
	if s, ok := ParseSignal(os.Getenv(EnvCheckpointSignal)); ok {
		return s
	}
	return syscall.SIGUSR1
}

// ParseSignal reads a signal name (USR1, SIGUSR1, TERM, …) or number.
func ParseSignal(name string) (syscall.Signal, bool) {
	name = strings.ToUpper(strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG"))
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	s, ok := map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
		"INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL}[name]
	return s, ok
}

// Watch returns a channel that delivers one Notice, the first of: the
// deadline in the environment at start, the deadline file, the
// annotation file, or a signal (then the deadline is the files' if they
// have one by then, else, in a Slurm job, the node's (ReadSlurmDeadline),
// else now plus the grace). It is closed after the
// notice, or when ctx ends.
func Watch(ctx context.Context, o Options) <-chan Notice {
	o = o.defaults()
	out := make(chan Notice, 1)
	sigs := make(chan os.Signal, 1)
	if len(o.Signals) > 0 {
		signal.Notify(sigs, o.Signals...)
	}
	go func() {
		defer close(out)
		defer signal.Stop(sigs)
		if t, ok := parseTime(os.Getenv(EnvDeadline)); ok {
			out <- Notice{Deadline: t, Source: "environment"}
			return
		}
		tick := time.NewTicker(o.Poll)
		defer tick.Stop()
		for {
			if n, ok := o.fromFiles(); ok {
				out <- n
				return
			}
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				n, ok := o.fromFiles()
				if !ok {
					n = Notice{Deadline: o.Now().Add(o.Grace)}
					// Under Slurm the node says the deadline.
					if t, ok := ReadSlurmDeadline(ctx); ok {
						n.Deadline = t
					}
				}
				n.Source = s.String()
				if sig, ok := s.(syscall.Signal); ok {
					n.Source = signalName(sig)
				}
				out <- n
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

func signalName(s syscall.Signal) string {
	for name, v := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
		"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT} {
		if v == s {
			return name
		}
	}
	return s.String()
}

// fromFiles reads the deadline file, then the annotations file.
func (o Options) fromFiles() (Notice, bool) {
	if o.DeadlineFile != "-" {
		if b, err := os.ReadFile(o.DeadlineFile); err == nil {
			if t, ok := parseTime(string(b)); ok {
				return Notice{Deadline: t, Source: "deadline-file"}, true
			}
		}
	}
	if o.AnnotationsFile != "-" {
		if t, ok := ReadAnnotation(o.AnnotationsFile); ok {
			return Notice{Deadline: t, Source: "annotation"}, true
		}
	}
	return Notice{}, false
}

// ReadAnnotation reads the deadline from a Downward API file of the
// pod's annotations (lines of key="value", the value quoted as in Go), or
// from a file holding the one annotation's value.
func ReadAnnotation(path string) (time.Time, bool) {
	return readAnnotation(path, AnnotationDeadline)
}

// readAnnotation reads annotation key's time from a Downward API file of
// the pod's annotations, or from a file holding that annotation alone.
func readAnnotation(path, key string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lines := 0
	var only string
	for sc.Scan() {
		line := sc.Text()
		lines++
		only = line
		k, val, ok := strings.Cut(line, "=")
		if !ok || k != key {
			continue
		}
		if v, err := strconv.Unquote(val); err == nil {
			val = v
		}
		return parseTime(val)
	}
	if lines == 1 && key == AnnotationDeadline { // metadata.annotations['sparecap.dev/preempt-deadline'] alone
		return parseTime(only)
	}
	return time.Time{}, false
}

func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
