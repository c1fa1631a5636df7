package simjob

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	benchSteps    = flag.Int("job-steps", 2000, "BenchmarkReclaimedJob: steps of the job (10ms each)")
	benchReclaims = flag.Int("job-reclaims", 5, "BenchmarkReclaimedJob: reclaims during the job")
)

// BenchmarkReclaimedJob measures what reclaims cost a real job end to
// end: the embedded server on a simulated fleet at 60x (a 5-second drain
// window), the job (sparecap trainer, 10ms steps, a 1s checkpoint
// interval) run as real processes on the cluster's preemptible node,
// reclaimed -job-reclaims times at random steps (its machine taken out
// of service; the controller drains the node and refills the target on
// another machine). Three runs side by side: uninterrupted, reclaimed
// under `sparecap run` (checkpoint on the notice), and reclaimed bare
// (SIGTERM only; the work since the last periodic checkpoint is lost).
//
//	go test -run '^$' -bench BenchmarkReclaimedJob -benchtime 1x ./internal/simjob/
func BenchmarkReclaimedJob(b *testing.B) {
	steps, k := *benchSteps, *benchReclaims
	var baseline time.Duration
	for _, mode := range []struct {
		name     string
		reclaims int
		bare     bool
	}{{"uninterrupted", 0, false}, {"notice", k, false}, {"bare", k, true}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				r := reclaimedJob(b, steps, mode.reclaims, mode.bare)
				if mode.reclaims == 0 {
					baseline = r.wall
				}
				b.ReportMetric(r.wall.Seconds(), "wall-s")
				if baseline > 0 && mode.reclaims > 0 {
					b.ReportMetric((r.wall - baseline).Seconds(), "extra-s")
					b.ReportMetric(float64(r.lost)/float64(mode.reclaims), "lost-steps/reclaim")
					b.ReportMetric(float64(r.noticeToExit.Milliseconds())/float64(mode.reclaims), "notice-to-exit-ms/reclaim")
					b.ReportMetric(r.waitNode.Seconds()/float64(mode.reclaims), "wait-node-s/reclaim")
				}
				b.Logf("%s: %d steps, %d reclaims: wall %s, lost %v steps, notice to exit %s, waiting for a node %s",
					mode.name, steps, mode.reclaims, r.wall.Round(10*time.Millisecond), r.lostEach, r.noticeToExit.Round(time.Millisecond), r.waitNode.Round(time.Millisecond))
			}
		})
	}
}

type jobRun struct {
	wall, noticeToExit, waitNode time.Duration
	lost                         int64
	lostEach                     []int64
}

func reclaimedJob(b *testing.B, steps, reclaims int, bare bool) jobRun {
	w := newWorld(b, 60)
	waitPreemptible(b, w, 1)
	dir := b.TempDir()
	rec := &recorder{}
	var out bytes.Buffer
	j := w.jobWith(b, dir, steps, bare, rec, &out, time.Second)
	rnd := rand.New(rand.NewPCG(7, uint64(reclaims)))
	for i := range reclaims {
		// A random step in the i-th of reclaims+1 equal parts.
		part := steps / (reclaims + 1)
		at := int64(i*part + part/4 + rnd.IntN(part/2))
		ev := running(b, j, rec)
		waitStep(b, dir, at)
		w.reclaim(b, ev.Node)
		for len(j.Attempts()) < i+1 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	as := completed(b, j, &out, 5*time.Minute)
	if len(as) != reclaims+1 || as[len(as)-1].Reached != int64(steps) {
		b.Fatalf("attempts %+v", as)
	}
	r := jobRun{wall: as[len(as)-1].Ended.Sub(as[0].Started)}
	for i, a := range as[:len(as)-1] {
		r.lost += a.Lost()
		r.lostEach = append(r.lostEach, a.Lost())
		r.noticeToExit += a.Ended.Sub(a.Noticed)
		r.waitNode += as[i+1].Started.Sub(a.Ended)
	}
	return r
}
