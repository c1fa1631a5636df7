package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/runwrap"
	"github.com/sparecap/sparecap/internal/simjob"
)

// The demo's training job: a real process (sparecap trainer) under
// `sparecap run` on one of the cluster's preemptible nodes.
const (
	jobSteps    = 800
	jobStepTime = 20 * time.Millisecond
	jobInterval = 2 * time.Second // 100 steps; compressed like the clock
)

// trainingJob starts the job on cluster and narrates it.
func (d *demo) trainingJob(ctx context.Context, dir, clusterID string) (*simjob.Job, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the demo's job runs this binary: %w", err)
	}
	d.say("job trainer: %d steps of %s, a checkpoint every %s and on the notice; it runs as a real process under `sparecap run`",
		jobSteps, jobStepTime, jobInterval)
	return simjob.Start(ctx, simjob.Config{
		Sim: d.srv.Sim, Clock: d.srv.Clock, Wall: d.wall, Speed: d.srv.Speed, ClusterID: clusterID, Class: domain.Preemptible,
		Name: "trainer", Grace: 10 * time.Minute, Binary: exe,
		// Not beside the simulated trainer that ignores SIGTERM, when
		// there is a choice: then the node goes as soon as the job exits.
		AvoidPods: []string{"trainer"},
		Job:       []string{exe, "trainer", "--steps", fmt.Sprint(jobSteps), "--step-time", jobStepTime.String(), "--state-bytes", "4194304"},
		Interval:  jobInterval, Margin: time.Second, Dir: filepath.Join(dir, "job"), Progress: true,
		OnEvent: d.jobEvent,
	})
}

func (d *demo) jobEvent(e simjob.Event) {
	a := e.Attempt
	switch e.Kind {
	case simjob.PodStarted:
		if a.ResumedAt > 0 {
			d.say("  job trainer: pod %s started on %s, resuming from its checkpoint at step %d", e.Pod, e.Node, a.ResumedAt)
		} else {
			d.say("  job trainer: pod %s started on %s at step 0", e.Pod, e.Node)
		}
	case simjob.PodNoticed:
		d.say("  job trainer: pod %s reads its deadline T+%s from its annotation, then gets SIGTERM; `sparecap run` asks the trainer for a checkpoint",
			e.Pod, offset(e.Deadline.Sub(d.start)))
	case simjob.PodEnded:
		took := a.Ended.Sub(a.Noticed).Round(10 * time.Millisecond)
		switch a.Code {
		case runwrap.ExitCheckpointed:
			d.say("  job trainer: pod %s checkpointed step %d and exited %s (real time) after the notice: %d steps lost; without the notice checkpoint it would have lost %d, back to step %d",
				e.Pod, a.Saved, took, a.Lost(), a.Reached-max(a.SavedAtNotice, 0), max(a.SavedAtNotice, 0))
		default:
			d.say("  job trainer: pod %s ended (exit %d) at step %d, %s after the notice: %d steps lost since its checkpoint at step %d",
				e.Pod, a.Code, a.Reached, took, a.Lost(), max(a.Saved, 0))
		}
	case simjob.JobCompleted:
		d.say("  job trainer: completed all %d steps on %s", a.Reached, e.Node)
	}
}

// jobSummary prints what the reclaims cost the job.
func (d *demo) jobSummary(j *simjob.Job) {
	as := j.Attempts()
	if len(as) == 0 {
		return
	}
	var lost int64
	var waited, drained time.Duration
	for i, a := range as {
		if i < len(as)-1 {
			lost += max(a.Lost(), 0)
			waited += as[i+1].Started.Sub(a.Ended)
			drained += a.Ended.Sub(a.Noticed)
		}
	}
	wall := as[len(as)-1].Ended.Sub(as[0].Started)
	ideal := time.Duration(jobSteps) * jobStepTime
	d.mu.Lock()
	defer d.mu.Unlock()
	reclaims := len(as) - 1
	fmt.Fprintf(d.out, "job trainer: %d steps of %s (%s of work) took %s of real time across %d pods.\n",
		jobSteps, jobStepTime, ideal, wall.Round(10*time.Millisecond), len(as))
	fmt.Fprintf(d.out, "  %d reclaim(s): %d steps lost; %s from notice to exit (the notice checkpoint); %s waiting for a preemptible node;\n",
		reclaims, lost, drained.Round(10*time.Millisecond), waited.Round(10*time.Millisecond))
	fmt.Fprintf(d.out, "  the other %s: starting processes, periodic checkpoints and the loop's own overhead.\n",
		(wall - ideal - drained - waited).Round(10*time.Millisecond))
}
