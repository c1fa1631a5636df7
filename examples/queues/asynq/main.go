// Command asynq-worker works Asynq tasks on a preemptible node. At the
// notice it shuts its server down with a ShutdownTimeout of a
// millisecond: Asynq stops dequeuing and pushes every task still active
// back to the head of its queue as it is (pending, its retried count
// unchanged), and the worker exits. A task that finishes is done, even if
// the notice came while it ran.
//
// The other ways lose time or a retry: a handler that returns an error
// (ctx.Err() included) spends a retry and waits for its retry delay; a
// worker that is killed leaves its tasks active until their lease
// expires (30 s) and Asynq's recoverer, about a minute later, moves them
// to retry, spending a retry too.
//
//	REDIS_URL=redis://redis:6379/0 ASYNQ_QUEUE=render WORKERS=4 asynq-worker
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// TypeItem is the tasks' type; the payload is the stand-in work's
// {"work": "90s"}.
const TypeItem = "item"

func main() {
	redis, err := asynq.ParseRedisURI(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatalf("REDIS_URL: %v", err)
	}
	queue := os.Getenv("ASYNQ_QUEUE")
	if queue == "" {
		queue = "default"
	}
	workers, err := strconv.Atoi(os.Getenv("WORKERS"))
	if err != nil || workers < 1 {
		workers = 1
	}

	// ctx ends at the notice: SIGTERM, or the deadline from `sparecap run`
	// or the pod's annotation. preempt.Noticed(ctx) then has the deadline.
	ctx, stop := preempt.NotifyContext(context.Background(), preempt.Options{})
	defer stop()

	srv := asynq.NewServer(redis, asynq.Config{
		Concurrency: workers,
		Queues:      map[string]int{queue: 1},
		// At Shutdown, tasks still active after ShutdownTimeout go back to
		// the queue without a retry: a millisecond is at once (0 would be
		// Asynq's default, 8 s).
		ShutdownTimeout: time.Millisecond,
		LogLevel:        asynq.WarnLevel,
		// The handlers' contexts are not the notice's: a handler that
		// returned ctx.Err() at the notice would spend a retry.
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeItem, handle)
	// Start, not Run: Run would take SIGTERM itself and wait 8 s.
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	log.Printf("working queue %q with %d workers", queue, workers)
	<-ctx.Done()
	n, _ := preempt.Noticed(ctx)
	log.Printf("notice (%s): deadline %s; taking no more tasks, giving back the ones in hand", n.Source, n.Deadline.Format(time.RFC3339))

	done := make(chan struct{})
	go func() { srv.Shutdown(); close(done) }()
	select {
	case <-done: // active tasks are back in the queue; their handlers end with the process
		log.Print("exiting: every task is done or back in the queue")
	case <-time.After(time.Until(n.Deadline) - 5*time.Second):
		log.Print("exiting at the deadline: tasks still active come back when their lease expires")
	}
}

func handle(ctx context.Context, t *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	log.Printf("took %s (retried %d)", id, retried)
	var item struct {
		Work string `json:"work"`
	}
	if err := json.Unmarshal(t.Payload(), &item); err != nil {
		return err
	}
	if err := process(ctx, item.Work); err != nil {
		return err
	}
	log.Printf("done %s", id)
	return nil
}

// process is the work: replace it with yours. This stand-in works as
// long as the task says.
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
