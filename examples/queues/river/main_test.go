package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sparecap/sparecap/examples/queues/internal/workerproc"
)

// soon is how soon after the notice a job the worker held must be
// available again (a read of river_job), and received is how soon another
// River client, polling at River's default interval (1 s), must be
// working it: against RescueStuckJobsAfter, an hour by default.
const (
	soon     = 2 * time.Second
	received = 3 * time.Second
)

// database returns the URL of a schema of the test's own in the test
// PostgreSQL (SPARECAP_TEST_POSTGRES, else 127.0.0.1:5432, database test,
// as scripts/ensure-postgres.sh makes it), with River's tables migrated
// in; the schema is dropped when the test ends.
func database(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	base := os.Getenv("SPARECAP_TEST_POSTGRES")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s (scripts/ensure-postgres.sh): %v", base, err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("river_recipe_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("River's migrations: %v", err)
	}
	return u.String()
}

type jobRow struct {
	state   string
	attempt int
	snoozes int
}

// TestReturnAtNotice runs the recipe against River on a real PostgreSQL:
// a job that finishes is completed; at the notice the two jobs in hand
// are available again at once with their attempt not counted, another
// client works them within about a second, and the worker exits well
// before its deadline.
func TestReturnAtNotice(t *testing.T) {
	dsn := database(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	read := func(id int64) jobRow {
		t.Helper()
		var r jobRow
		if err := pool.QueryRow(ctx, `SELECT state, attempt, coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE id = $1`, id).
			Scan(&r.state, &r.attempt, &r.snoozes); err != nil {
			t.Fatalf("read job %d: %v", id, err)
		}
		return r
	}
	waitState := func(id int64, state string, within time.Duration) jobRow {
		t.Helper()
		start := time.Now()
		for {
			r := read(id)
			if r.state == state {
				return r
			}
			if time.Since(start) > within {
				t.Fatalf("job %d is %s after %s, want %s", id, r.state, within, state)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(work string) int64 {
		t.Helper()
		res, err := inserter.Insert(ctx, ItemArgs{Work: work}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}

	w := workerproc.Start(t, workerproc.Build(t, "."), "DATABASE_URL="+dsn, "WORKERS=2", "SPARECAP_GRACE=15s")

	// A job that finishes before the notice is completed, on its first attempt.
	short := insert("100ms")
	w.WaitLine(regexp.MustCompile(fmt.Sprintf(`done job %d$`, short)), 30*time.Second)
	if r := waitState(short, "completed", 5*time.Second); r.attempt != 1 {
		t.Fatalf("the short job completed at attempt %d, want 1", r.attempt)
	}
	// Two jobs whose work takes far longer than the test.
	long := []int64{insert("1h"), insert("1h")}
	for _, id := range long {
		w.WaitLine(regexp.MustCompile(fmt.Sprintf(`took job %d \(attempt 1\)$`, id)), 30*time.Second)
		if r := read(id); r.state != "running" || r.attempt != 1 {
			t.Fatalf("job %d before the notice: %+v, want running at attempt 1", id, r)
		}
	}

	// Another consumer: a River client of the test's own, with River's
	// defaults, started once the worker holds both jobs.
	type work struct {
		id, attempt int64
		at          time.Time
	}
	got := make(chan work, 10)
	registry := river.NewWorkers()
	river.AddWorker(registry, river.WorkFunc(func(ctx context.Context, job *river.Job[ItemArgs]) error {
		got <- work{job.ID, int64(job.Attempt), time.Now()}
		return nil
	}))
	other, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers: registry,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		other.Stop(sctx)
	})

	notice := w.Notice()
	deadline := notice.Add(15 * time.Second) // SPARECAP_GRACE

	// Back in the queue at once: available (or already taken again) with the
	// attempt back to 0. Read every 5 ms.
	back := map[int64]time.Duration{}
	for len(back) < len(long) {
		for _, id := range long {
			if _, ok := back[id]; ok {
				continue
			}
			r := read(id)
			switch {
			case r.state == "available" && r.attempt == 0 && r.snoozes == 1:
				back[id] = time.Since(notice)
			case (r.state == "running" || r.state == "completed") && r.attempt == 1 && r.snoozes == 1: // the other client was quicker than this read
				back[id] = time.Since(notice)
			case r.state != "running" || r.snoozes != 0:
				t.Fatalf("job %d after the notice: %+v, want available at attempt 0, snoozed once", id, r)
			}
		}
		if time.Since(notice) > soon {
			t.Fatalf("after %s only %v of %v are back in the queue", soon, back, long)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Another consumer works each, as its first attempt.
	var seen []int64
	for len(seen) < len(long) {
		select {
		case g := <-got:
			if !slices.Contains(long, g.id) || slices.Contains(seen, g.id) {
				t.Fatalf("the other client worked job %d, which is not one the worker held, or twice", g.id)
			}
			if g.attempt != 1 {
				t.Fatalf("the other client works job %d at attempt %d, want 1: the reclaim counted an attempt", g.id, g.attempt)
			}
			seen = append(seen, g.id)
			t.Logf("job %d back in the queue %s after the notice (read of river_job), worked by another client %s after it, attempt %d",
				g.id, back[g.id].Round(time.Millisecond), g.at.Sub(notice).Round(time.Millisecond), g.attempt)
			if g.at.Sub(notice) > received {
				t.Fatalf("job %d was worked again %s after the notice, want within %s", g.id, g.at.Sub(notice), received)
			}
		case <-time.After(time.Until(notice.Add(received))):
			t.Fatalf("the other client worked %v within %s of the notice, want %v", seen, received, long)
		}
	}

	exit, err := w.Exit(deadline)
	if err != nil {
		t.Fatalf("the worker exited with %v", err)
	}
	t.Logf("the worker exited %s after the notice (deadline %s after it)", exit.Sub(notice).Round(time.Millisecond), deadline.Sub(notice))
	for _, id := range long {
		w.WaitLine(regexp.MustCompile(fmt.Sprintf(`gave job %d back to the queue$`, id)), time.Second)
		if r := waitState(id, "completed", 5*time.Second); r.attempt != 1 || r.snoozes != 1 {
			t.Fatalf("job %d at the end: %+v, want completed at attempt 1, snoozed once", id, r)
		}
	}
	// The short job stayed completed and was never worked again.
	if r := read(short); r.state != "completed" || r.attempt != 1 {
		t.Fatalf("the short job at the end: %+v", r)
	}
	select {
	case g := <-got:
		t.Fatalf("the other client also worked job %d", g.id)
	default:
	}
}
