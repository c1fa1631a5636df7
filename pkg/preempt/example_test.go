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
