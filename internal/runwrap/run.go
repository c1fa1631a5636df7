package runwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// run is one supervised job, through its phases: started, waiting for
// the notice, asked for a checkpoint, told to terminate.
type run struct {
	cfg     Config
	res     Result
	store   *preempt.Store
	dfile   string // the deadline file the job reads
	cmd     *exec.Cmd
	pgid    int
	started time.Time
	exited  chan int
	sigs    chan os.Signal
	notice  preempt.Notice
	noticed time.Time
	before  int64 // the latest checkpoint's step at the notice (-1: none)
	// reported is the step of the latest checkpoint told to OnCheckpoint
	// (or there at the start); reportFailed: an error was logged.
	reported int64
	// toReport holds the newest checkpoint not yet reported: one report
	// at a time, in order, the newest winning (reporter).
	toReport chan preempt.Checkpoint
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, "sparecap run: "+format+"\n", args...)
}

// Run runs the job until it ends; ctx ending is a notice with the grace.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	if len(cfg.Command) == 0 {
		return Result{Code: ExitNotStarted}, errors.New("no command: sparecap run [flags] -- CMD ARGS...")
	}
	// Orphaned grandchildren come to us and are reaped: no zombies, also
	// as a container's PID 1.
	_ = setSubreaper()
	r := &run{cfg: cfg}
	// Reports still going when the job is over are cut short: the pod
	// they describe is ending.
	reportCtx, cancelReports := context.WithCancel(ctx)
	defer cancelReports()
	if cfg.OnCheckpoint != nil {
		r.toReport = make(chan preempt.Checkpoint, 1)
		done := make(chan struct{})
		go r.reporter(reportCtx, done)
		defer func() { close(r.toReport); cancelReports(); <-done }()
	}
	env, err := r.environment()
	if err != nil {
		return Result{Code: ExitNotStarted}, err
	}
	defer os.Remove(r.dfile)
	if err := r.start(env); err != nil {
		return Result{Code: ExitNotStarted}, err
	}
	defer signal.Stop(r.sigs)
	defer func() {
		// Whatever is left of the job's group goes, and is reaped.
		syscall.Kill(-r.pgid, syscall.SIGKILL)
		reapGroup(r.cfg.Clock, r.pgid, time.Second)
	}()
	if code, ended := r.awaitNotice(ctx, r.notices(ctx)); ended {
		r.res.Code = code
		return r.res, nil
	}
	r.noticeCame()
	if code, ended := r.askCheckpoint(); ended {
		r.logf("the job ended before it was asked for a checkpoint")
		return r.ended(code), nil
	}
	if code, ended := r.awaitCheckpoint(); ended {
		return r.ended(code), nil
	}
	return r.terminate(), nil
}

// environment opens the checkpoint store and the deadline file, and
// returns the job's environment.
func (r *run) environment() ([]string, error) {
	cfg := r.cfg
	env := append([]string(nil), cfg.Env...)
	if cfg.CheckpointDir != "" {
		s, err := preempt.Open(cfg.CheckpointDir)
		if err != nil {
			return nil, fmt.Errorf("checkpoint directory: %w", err)
		}
		r.store = s
		env = append(env, preempt.EnvCheckpointDir+"="+cfg.CheckpointDir)
		r.reported = -1
		if ck, err := s.Latest(); err == nil {
			r.reported = ck.Step // the pod started since: not news
			r.res.ResumedFrom = &ck
			env = append(env, preempt.EnvResumeFrom+"="+ck.Dir)
			r.logf("resuming from checkpoint %d (%s)", ck.Step, ck.Dir)
		}
	}
	// The job reads its deadline from this file, empty until known.
	dfile, err := os.CreateTemp("", "sparecap-deadline-")
	if err != nil {
		return nil, err
	}
	dfile.Close()
	r.dfile = dfile.Name()
	env = append(env, preempt.EnvDeadlineFile+"="+r.dfile, preempt.EnvGrace+"="+cfg.Grace.String(),
		preempt.EnvCheckpointSignal+"="+signalName(cfg.CheckpointSignal),
		// The job must not read the pod's annotations and the wrapper's
		// file as two sources: the wrapper passes the annotation on.
		preempt.EnvAnnotationsFile+"=-")
	if cfg.Interval > 0 {
		env = append(env, preempt.EnvCheckpointInterval+"="+cfg.Interval.String())
	}
	if cfg.RatePercentPerHour > 0 {
		env = append(env, preempt.EnvPreemptionRate+"="+strconv.FormatFloat(cfg.RatePercentPerHour, 'g', -1, 64))
	}
	if !cfg.Deadline.IsZero() {
		env = append(env, preempt.EnvDeadline+"="+cfg.Deadline.UTC().Format(time.RFC3339Nano))
		r.writeDeadline(cfg.Deadline)
	}
	return env, nil
}

func (r *run) writeDeadline(t time.Time) {
	_ = os.WriteFile(r.dfile, []byte(t.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
}

// start starts the job in a process group of its own, with the wrapper's
// signals caught: SIGTERM is a notice; the others go to the job.
func (r *run) start(env []string) error {
	cfg := r.cfg
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, cfg.Stdout, cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the job and its children: one group
	r.sigs = make(chan os.Signal, 8)
	signal.Notify(r.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if err := cmd.Start(); err != nil {
		signal.Stop(r.sigs)
		return fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	r.cmd, r.pgid, r.started = cmd, cmd.Process.Pid, r.cfg.Clock.Now()
	r.exited = make(chan int, 1)
	go func() {
		cmd.Wait()
		r.exited <- exitCode(cmd.ProcessState)
	}()
	return nil
}

// notices is where the notice comes from: the flag's deadline, known from
// the start, or the annotations file and the deadline file, watched.
func (r *run) notices(ctx context.Context) <-chan preempt.Notice {
	cfg := r.cfg
	if !cfg.Deadline.IsZero() {
		ch := make(chan preempt.Notice, 1)
		ch <- preempt.Notice{Deadline: cfg.Deadline, Source: "flag"}
		return ch
	}
	notices := preempt.Watch(ctx, preempt.Options{AnnotationsFile: cfg.AnnotationsFile, DeadlineFile: "-",
		Grace: cfg.Grace, Signals: []os.Signal{}, Poll: cfg.Poll})
	if cfg.DeadlineFile != "" {
		notices = first(ctx, notices, preempt.Watch(ctx, preempt.Options{AnnotationsFile: "-", DeadlineFile: cfg.DeadlineFile,
			Signals: []os.Signal{}, Poll: cfg.Poll}))
	}
	return notices
}

// awaitNotice forwards signals until the notice comes (a notice, the
// wrapper's SIGTERM, ctx's end) or the job ends by itself (ended).
func (r *run) awaitNotice(ctx context.Context, notices <-chan preempt.Notice) (code int, ended bool) {
	var reports <-chan time.Time
	arm := func() {
		if r.store != nil && r.cfg.OnCheckpoint != nil {
			reports = r.cfg.Clock.After(r.cfg.Poll)
		}
	}
	arm()
	actx, stop := context.WithCancel(ctx)
	defer stop()
	ahead := r.ahead(actx)
	for {
		select {
		case <-reports:
			r.reportCheckpoint()
			arm()
		case at := <-ahead:
			r.logf("asking the job for a checkpoint ahead of its notice at %s", at.UTC().Format(time.RFC3339))
			syscall.Kill(r.cmd.Process.Pid, r.cfg.CheckpointSignal)
		case code := <-r.exited:
			return code, true
		case s := <-r.sigs:
			if s == syscall.SIGTERM {
				r.notice = r.graceNotice("SIGTERM")
				return 0, false
			}
			syscall.Kill(-r.pgid, s.(syscall.Signal))
		case n, ok := <-notices:
			if !ok {
				notices = nil
				continue
			}
			r.notice = n
			return 0, false
		case <-ctx.Done():
			r.notice = r.graceNotice("cancelled")
			return 0, false
		}
	}
}

// reportCheckpoint hands the reporter a checkpoint committed since the
// last one handed, replacing one it has not taken yet: a slow API must
// not hold the job's notice.
func (r *run) reportCheckpoint() {
	ck, err := r.store.Latest()
	if err != nil || ck.Step <= r.reported {
		return
	}
	r.reported = ck.Step
	select {
	case <-r.toReport:
	default:
	}
	r.toReport <- ck
}

// reporter tells OnCheckpoint of the checkpoints handed to it, one at a
// time; the first failure is logged, later ones are not.
func (r *run) reporter(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	failed := false
	for ck := range r.toReport {
		if err := r.cfg.OnCheckpoint(ctx, ck); err != nil && ctx.Err() == nil && !failed {
			failed = true
			r.logf("cannot report checkpoint %d (further failures are not logged): %v", ck.Step, err)
		}
	}
}

// graceNotice is a notice with the grace from now, unless the files know
// a deadline by now: that beats the grace.
func (r *run) graceNotice(source string) preempt.Notice {
	n := preempt.Notice{Deadline: r.cfg.Clock.Now().Add(r.cfg.Grace), Source: source}
	if t, ok := readDeadline(r.cfg); ok {
		n.Deadline = t
	}
	return n
}

// noticeCame records the notice, hands the job its deadline and notes the
// latest checkpoint, for a new one to be told from it.
func (r *run) noticeCame() {
	r.res.Notice = &r.notice
	r.logf("notice (%s): deadline %s; asking for a checkpoint (%s)", r.notice.Source, r.notice.Deadline.UTC().Format(time.RFC3339), signalName(r.cfg.CheckpointSignal))
	r.writeDeadline(r.notice.Deadline)
	r.noticed = r.cfg.Clock.Now()
	r.before = -1
	if r.store != nil {
		if ck, err := r.store.Latest(); err == nil {
			r.before = ck.Step
		}
	}
}

// checkpointed reports whether a checkpoint was committed since the
// notice, recording the first one seen.
func (r *run) checkpointed() bool {
	if r.store == nil || r.res.Checkpoint != nil {
		return r.res.Checkpoint != nil
	}
	ck, err := r.store.Latest()
	if err == nil && (ck.Step > r.before || ck.Time.After(r.noticed)) {
		r.res.Checkpoint = &ck
		r.logf("checkpoint %d committed %s after the notice", ck.Step, r.cfg.Clock.Now().Sub(r.noticed).Round(time.Millisecond))
	}
	return r.res.Checkpoint != nil
}

// ended is the result of a preempted job that ended with code.
func (r *run) ended(code int) Result {
	r.checkpointed()
	r.res.Code = ExitTerminated
	if r.res.Checkpoint != nil {
		r.res.Code = ExitCheckpointed
	}
	r.logf("the job ended (its exit code %d); exit %d", code, r.res.Code)
	return r.res
}

// askCheckpoint sends the checkpoint signal: not before the job could set
// up its handlers (a notice known at start), nor after the time for
// SIGTERM. ended: the job ended before.
func (r *run) askCheckpoint() (code int, ended bool) {
	wait := min(r.started.Add(r.cfg.Startup).Sub(r.cfg.Clock.Now()), r.notice.Deadline.Add(-r.cfg.Margin).Sub(r.cfg.Clock.Now()))
	if wait > 0 {
		select {
		case code := <-r.exited:
			return code, true
		case <-r.cfg.Clock.After(wait):
		}
	}
	syscall.Kill(r.cmd.Process.Pid, r.cfg.CheckpointSignal)
	return 0, false
}

// awaitCheckpoint waits until a new checkpoint is committed, the job
// ends (ended), or the deadline less the margin comes.
func (r *run) awaitCheckpoint() (code int, ended bool) {
	termAt := r.cfg.Clock.After(max(r.notice.Deadline.Add(-r.cfg.Margin).Sub(r.cfg.Clock.Now()), 0))
	for {
		select {
		case code := <-r.exited:
			return code, true
		case s := <-r.sigs:
			if s != syscall.SIGTERM {
				syscall.Kill(-r.pgid, s.(syscall.Signal))
			}
		case <-r.cfg.Clock.After(r.cfg.Poll):
			if r.checkpointed() {
				return 0, false
			}
		case <-termAt:
			r.logf("no checkpoint by the deadline less %s", r.cfg.Margin)
			return 0, false
		}
	}
}

// terminate sends SIGTERM to the job's group and SIGKILL at the deadline.
func (r *run) terminate() Result {
	r.logf("sending SIGTERM; SIGKILL at the deadline")
	syscall.Kill(-r.pgid, syscall.SIGTERM)
	kill := r.cfg.Clock.After(max(r.notice.Deadline.Sub(r.cfg.Clock.Now()), 0))
	for {
		select {
		case code := <-r.exited:
			return r.ended(code)
		case <-r.cfg.Clock.After(r.cfg.Poll):
			r.checkpointed()
		case <-r.sigs:
		case <-kill:
			syscall.Kill(-r.pgid, syscall.SIGKILL)
			<-r.exited
			r.checkpointed()
			r.res.Code = ExitKilled
			r.logf("the job was still running at its deadline: killed; exit %d", r.res.Code)
			return r.res
		}
	}
}
