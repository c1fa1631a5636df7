package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sparecap/sparecap/examples/queues/internal/workerproc"
)

// redisURL is the test Redis (scripts/ensure-redis.sh) and a database of
// these tests' own; each test also has a queue of its own.
const redisURL = "redis://127.0.0.1:6379/9"

// soon is how soon after the notice a task the worker held must be
// pending again (a read of the task), and received is how soon another
// Asynq server, polling at Asynq's default interval (about a second),
// must be working it: against the lease's 30 s and the recoverer.
const (
	soon     = 2 * time.Second
	received = 3 * time.Second
)

// dropQueue deletes every key of queue, whatever state its tasks are in
// (Inspector.DeleteQueue leaves completed tasks, and refuses a queue with
// active ones), and the queue from Asynq's list.
func dropQueue(t *testing.T, opt asynq.RedisConnOpt, queue string) {
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "asynq:{"+queue+"}:*", 100).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("drop queue %s: %v", queue, err)
		return
	}
	if len(keys) > 0 {
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("drop queue %s: %v", queue, err)
		}
	}
	if err := rdb.SRem(ctx, "asynq:queues", queue).Err(); err != nil {
		t.Errorf("drop queue %s: %v", queue, err)
	}
}

// TestReturnAtNotice runs the recipe against Asynq on a real Redis: a
// task that finishes is completed; at the notice the two tasks in hand
// are pending again at once with no retry counted, another server works
// them within about a second, and the worker exits well before its
// deadline.
func TestReturnAtNotice(t *testing.T) {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("recipe-%d-%d", os.Getpid(), time.Now().UnixNano())
	inspector := asynq.NewInspector(opt)
	t.Cleanup(func() { inspector.Close() })
	t.Cleanup(func() { dropQueue(t, opt, queue) })
	client := asynq.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(); err != nil {
		t.Fatalf("Redis is not reachable at %s (scripts/ensure-redis.sh): %v", redisURL, err)
	}
	enqueue := func(work string) string {
		t.Helper()
		info, err := client.Enqueue(asynq.NewTask(TypeItem, fmt.Appendf(nil, `{"work":%q}`, work)),
			asynq.Queue(queue), asynq.MaxRetry(5), asynq.Retention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}
	read := func(id string) *asynq.TaskInfo {
		t.Helper()
		info, err := inspector.GetTaskInfo(queue, id)
		if err != nil {
			t.Fatalf("read task %s: %v", id, err)
		}
		return info
	}
	waitCompleted := func(id string) *asynq.TaskInfo {
		t.Helper()
		for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
			if info := read(id); info.State == asynq.TaskStateCompleted {
				return info
			} else if time.Since(start) > 5*time.Second {
				t.Fatalf("task %s is %s, want completed", id, info.State)
			}
		}
	}

	w := workerproc.Start(t, workerproc.Build(t, "."),
		"REDIS_URL="+redisURL, "ASYNQ_QUEUE="+queue, "WORKERS=2", "SPARECAP_GRACE=15s")

	// A task that finishes before the notice is completed, with no retry.
	short := enqueue("100ms")
	w.WaitLine(regexp.MustCompile(`done `+regexp.QuoteMeta(short)+`$`), 30*time.Second)
	if info := waitCompleted(short); info.Retried != 0 {
		t.Fatalf("the short task completed after %d retries", info.Retried)
	}
	// Two tasks whose work takes far longer than the test.
	long := []string{enqueue("1h"), enqueue("1h")}
	for _, id := range long {
		w.WaitLine(regexp.MustCompile(`took `+regexp.QuoteMeta(id)+` \(retried 0\)$`), 30*time.Second)
		if info := read(id); info.State != asynq.TaskStateActive {
			t.Fatalf("task %s before the notice is %s, want active", id, info.State)
		}
	}

	// Another consumer: an Asynq server of the test's own, with Asynq's
	// defaults, started once the worker holds both tasks.
	type work struct {
		id      string
		retried int
		at      time.Time
	}
	got := make(chan work, 10)
	other := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{queue: 1}, LogLevel: asynq.WarnLevel})
	if err := other.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		got <- work{id, retried, time.Now()}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Shutdown)

	notice := w.Notice()
	deadline := notice.Add(15 * time.Second) // SPARECAP_GRACE

	// Back in the queue at once: pending (or already worked again), no
	// retry counted. Read every 5 ms.
	back := map[string]time.Duration{}
	for len(back) < len(long) {
		for _, id := range long {
			if _, ok := back[id]; ok {
				continue
			}
			info := read(id)
			switch {
			case info.Retried != 0 || info.State != asynq.TaskStatePending && info.State != asynq.TaskStateActive && info.State != asynq.TaskStateCompleted:
				t.Fatalf("task %s after the notice is %s after %d retries, want pending with none", id, info.State, info.Retried)
			case info.State != asynq.TaskStateActive: // pending, or completed by the other server already
				back[id] = time.Since(notice)
			}
		}
		if time.Since(notice) > soon {
			t.Fatalf("after %s only %v of %v are back in the queue", soon, back, long)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Another consumer works each, with no retry counted.
	var seen []string
	for len(seen) < len(long) {
		select {
		case g := <-got:
			if !slices.Contains(long, g.id) || slices.Contains(seen, g.id) {
				t.Fatalf("the other server worked task %s, which is not one the worker held, or twice", g.id)
			}
			if g.retried != 0 {
				t.Fatalf("the other server works task %s after %d retries, want 0: the reclaim counted a retry", g.id, g.retried)
			}
			seen = append(seen, g.id)
			t.Logf("task %s back in the queue %s after the notice (read of the task), worked by another server %s after it, retried %d",
				g.id, back[g.id].Round(time.Millisecond), g.at.Sub(notice).Round(time.Millisecond), g.retried)
			if g.at.Sub(notice) > received {
				t.Fatalf("task %s was worked again %s after the notice, want within %s", g.id, g.at.Sub(notice), received)
			}
		case <-time.After(time.Until(notice.Add(received))):
			t.Fatalf("the other server worked %v within %s of the notice, want %v", seen, received, long)
		}
	}

	exit, err := w.Exit(deadline)
	if err != nil {
		t.Fatalf("the worker exited with %v", err)
	}
	t.Logf("the worker exited %s after the notice (deadline %s after it)", exit.Sub(notice).Round(time.Millisecond), deadline.Sub(notice))
	for _, id := range long {
		if info := waitCompleted(id); info.Retried != 0 {
			t.Fatalf("task %s completed after %d retries, want 0", id, info.Retried)
		}
	}
	// The short task stayed completed and was never worked again.
	if info := read(short); info.State != asynq.TaskStateCompleted || info.Retried != 0 {
		t.Fatalf("the short task at the end is %s after %d retries", info.State, info.Retried)
	}
	select {
	case g := <-got:
		t.Fatalf("the other server also worked task %s", g.id)
	default:
	}
}
