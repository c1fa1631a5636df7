// Command river-worker works River jobs on a preemptible node. At the
// notice it stops fetching jobs, hands each job it is working back to the
// queue at once with river.JobSnooze(0) (available again now, its attempt
// not counted), and exits. Without that, a job cut off by the reclaim
// stays `running` until River's rescuer finds it (RescueStuckJobsAfter,
// an hour by default) and then counts as a failed attempt. A job that
// finishes is completed, even if the notice came while it ran.
//
//	DATABASE_URL=postgres://worker@db:5432/app WORKERS=4 river-worker
//
// DATABASE_URL may name the schema of River's tables with search_path
// (…/app?search_path=jobs); RIVER_QUEUE names the queue (default
// "default").
package main

import (
	"context"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// ItemArgs is a job's arguments. Work is for the stand-in work of
// process: how long it takes ("90s").
type ItemArgs struct {
	Work string `json:"work"`
}

func (ItemArgs) Kind() string { return "item" }

type ItemWorker struct {
	river.WorkerDefaults[ItemArgs]
}

// Timeout: none; the work takes as long as it takes (River's default
// would cancel it after a minute).
func (*ItemWorker) Timeout(*river.Job[ItemArgs]) time.Duration { return -1 }

func (*ItemWorker) Work(ctx context.Context, job *river.Job[ItemArgs]) error {
	log.Printf("took job %d (attempt %d)", job.ID, job.Attempt)
	if err := process(ctx, job.Args.Work); err != nil {
		if _, noticed := preempt.Noticed(ctx); noticed {
			// Reclaimed: back to the queue now, this attempt not counted.
			log.Printf("gave job %d back to the queue", job.ID)
			return river.JobSnooze(0)
		}
		return err // a failure of the work itself: River retries it
	}
	log.Printf("done job %d", job.ID)
	return nil
}

func main() {
	queue := os.Getenv("RIVER_QUEUE")
	if queue == "" {
		queue = river.QueueDefault
	}
	workers, err := strconv.Atoi(os.Getenv("WORKERS"))
	if err != nil || workers < 1 {
		workers = 1
	}

	// ctx ends at the notice: SIGTERM, or the deadline from `sparecap run`
	// or the pod's annotation. preempt.Noticed(ctx) then has the deadline.
	ctx, stop := preempt.NotifyContext(context.Background(), preempt.Options{})
	defer stop()

	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	registry := river.NewWorkers()
	river.AddWorker(registry, &ItemWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{queue: {MaxWorkers: workers}},
		Workers: registry,
		// SoftStopTimeout stays unset: then the end of Start's context
		// stops fetching and cancels the running jobs' contexts at once,
		// and those contexts carry the notice (preempt.Noticed).
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("working queue %q with %d workers", queue, workers)
	<-ctx.Done()
	n, _ := preempt.Noticed(ctx)
	log.Printf("notice (%s): deadline %s; taking no more jobs, giving back the ones in hand", n.Source, n.Deadline.Format(time.RFC3339))

	select {
	case <-client.Stopped(): // every job completed or snoozed, and recorded
		log.Print("exiting: every job is done or back in the queue")
	case <-time.After(time.Until(n.Deadline) - 5*time.Second):
		log.Print("exiting at the deadline: jobs still running are left to River's rescuer")
	}
}

// process is the work: replace it with yours, and have it return when
// ctx ends (the notice). This stand-in works as long as the job says.
func process(ctx context.Context, work string) error {
	d, err := time.ParseDuration(work)
	if err != nil {
		return err
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
