package preempt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// The checkpoint interval for an A100 spot rate (2.3 %/h) and a 90-second
// checkpoint, with what it costs.
func ExampleInterval() {
	cost := 90 * time.Second
	tau := preempt.Interval(2.3, cost)
	e := preempt.Expect(tau, cost, preempt.MTBF(2.3))
	fmt.Printf("every %s: %.2f%% overhead, %s lost per preemption without a notice checkpoint\n",
		tau.Round(time.Minute), 100*e.Overhead, e.LostPerPreemption.Round(time.Minute))
	// Output: every 1h27m0s: 3.42% overhead, 44m0s lost per preemption without a notice checkpoint
}

// A job that saves on a schedule and on the notice, and resumes.
func ExampleStore() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	store, _ := preempt.Open(dir)
	step := int64(0)
	if ck, err := store.Latest(); err == nil {
		step = ck.Step + 1 // resume after it
	}
	save := func(step int64) {
		store.Save(step, func(d string) error {
			return os.WriteFile(filepath.Join(d, "model.bin"), []byte(fmt.Sprint("weights at ", step)), 0o644)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notice := preempt.Watch(ctx, preempt.Options{AnnotationsFile: "-", DeadlineFile: "-", Signals: []os.Signal{}})
	for ; step < 5; step++ {
		select {
		case n := <-notice:
			save(step) // must end before n.Deadline
			fmt.Println("preempted; saved step", step, "before", n.Deadline)
			return
		default:
		}
		if step%2 == 0 {
			save(step)
		}
	}
	ck, _ := store.Latest()
	b, _ := os.ReadFile(filepath.Join(ck.Dir, "model.bin"))
	fmt.Println(ck.Step, string(b))
	// Output: 4 weights at 4
}

// A worker that takes items from a queue: it stops taking them at the
// notice, and an item interrupted by the notice goes back to the queue at
// once (docs/queues.md has whole workers for SQS, River and Asynq).
func ExampleNotifyContext() {
	ctx, stop := preempt.NotifyContext(context.Background(), preempt.Options{})
	defer stop()
	type item struct{ id string }
	next := func(ctx context.Context) (item, error) { <-ctx.Done(); return item{}, ctx.Err() } // your queue's receive
	work := func(ctx context.Context, it item) error { return nil }                            // your work; returns when ctx ends
	giveBack := func(ctx context.Context, it item) error { return nil }                        // e.g. SQS: ChangeMessageVisibility 0
	ack := func(ctx context.Context, it item) error { return nil }
	for ctx.Err() == nil {
		it, err := next(ctx)
		if err != nil {
			continue
		}
		if err := work(ctx, it); err != nil {
			if n, ok := preempt.Noticed(ctx); ok {
				// Reclaimed: give the item back now, and by the deadline.
				back, cancel := context.WithDeadline(context.WithoutCancel(ctx), n.Deadline)
				giveBack(back, it)
				cancel()
			}
			continue
		}
		ack(context.WithoutCancel(ctx), it) // done, even if the notice came meanwhile
	}
}
