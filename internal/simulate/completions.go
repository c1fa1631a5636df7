package simulate

import (
	"slices"
	"time"
)

// workChange changes a tenant's useful work: from at on, it does rate
// more GPU-seconds of useful work a second; jump is work lost at once (a
// reclaim's work since the last checkpoint and its restart).
type workChange struct {
	at         time.Time
	rate, jump float64
}

// jobTimes runs the tenant's jobs of size GPU-hours one after another on
// its useful work: a job ends when the work done since the last one ended
// reaches its size. It fills the tenant's job figures.
func (t *Tenant) jobTimes(changes []workChange, gpuHours float64) {
	slices.SortStableFunc(changes, func(a, b workChange) int { return a.at.Compare(b.at) })
	size := gpuHours * 3600
	var ends []time.Time
	var done, rate float64
	var start time.Time
	for i, c := range changes {
		if i == 0 {
			start = c.at
		} else if dt := c.at.Sub(changes[i-1].at).Seconds(); rate > 0 && dt > 0 {
			for done+rate*dt >= size*float64(len(ends)+1) {
				need := size*float64(len(ends)+1) - done
				at := changes[i-1].at.Add(time.Duration(need / rate * float64(time.Second)))
				ends = append(ends, at)
				if len(ends) > MaxEvents {
					break
				}
			}
			done += rate * dt
		}
		rate += c.rate
		done += c.jump
		// Work lost belongs to the job running: a job that ended keeps
		// its end.
		if floor := size * float64(len(ends)); done < floor {
			done = floor
		}
	}
	if len(ends) == 0 {
		return
	}
	took := make([]float64, len(ends))
	prev := start
	var sum float64
	for i, e := range ends {
		took[i] = e.Sub(prev).Hours()
		sum += took[i]
		prev = e
	}
	slices.Sort(took)
	t.JobsCompleted = len(ends)
	t.JobHoursMean, t.JobHoursP90 = round(sum/float64(len(ends))), round(took[len(took)*9/10])
	if t.TargetGPUs > 0 {
		t.JobHoursOnDemand = round(gpuHours / float64(t.TargetGPUs))
	}
}
