// Package preempt helps a job survive the reclaim of a preemptible node on
// sparecap: it tells the job its deadline as soon as it is known, saves
// checkpoints atomically so a job killed mid-save resumes from the last
// complete one, and picks a checkpoint interval from the measured
// preemption rate.
//
// On sparecap a reclaimed node's pods learn their deadline from three
// places, whichever comes first: the pod annotation
// sparecap.dev/preempt-deadline (RFC 3339), which a Downward API volume
// shows as a file the kubelet refreshes; the environment and a file that
// `sparecap run` keeps (SPARECAP_DEADLINE, SPARECAP_DEADLINE_FILE); and
// SIGTERM, after which the pod has its termination grace period.
// [Watch] turns all three into one notice; [NotifyContext] gives it as a
// context that ends at the notice, for workers that take items from a
// queue and give them back at the notice (docs/queues.md).
//
// A training loop, in short:
//
//	store, _ := preempt.Open(os.Getenv("SPARECAP_CHECKPOINT_DIR"))
//	step := int64(0)
//	if ck, err := store.Latest(); err == nil {
//		step = load(ck.Dir) // resume
//	}
//	notice := preempt.Watch(ctx, preempt.Options{})
//	// Daly's interval for the rate sparecap run passes and the measured save time.
//	schedule := preempt.NewSchedule(store, 30*time.Minute)
//	for ; step < total; step++ {
//		train(step)
//		select {
//		case n := <-notice:
//			store.Save(step, save) // before n.Deadline
//			return
//		default:
//		}
//		if schedule.Due() {
//			store.Save(step, save)
//			schedule.Saved()
//		}
//	}
//
// See docs/workloads.md for the pod spec and the whole recipe.
package preempt
