package webhooks

import (
	"sync"
	"time"
)

// DefaultDedupWindow is how long a Dedup remembers an ID unless told
// otherwise: longer than sparecap retries a delivery (a day).
const DefaultDedupWindow = 25 * time.Hour

// DefaultDedupMax is how many IDs a Dedup remembers at most unless told
// otherwise; the oldest are forgotten first.
const DefaultDedupMax = 100_000

// Dedup remembers the delivery IDs a receiver has handled, in memory, so
// a delivery sent again (a retry whose 2xx answer was lost, or a replay
// inside the timestamp tolerance) is recognised. Check Seen before
// handling a delivery and Add its ID once it is handled: a delivery that
// failed is then handled again when it is retried. A receiver with
// several processes keeps the IDs where they all see them (its database)
// instead. The zero value is ready to use; it is safe for concurrent use.
type Dedup struct {
	// Window is how long an ID is remembered (0: DefaultDedupWindow).
	Window time.Duration
	// Max bounds the IDs remembered (0: DefaultDedupMax).
	Max int

	mu    sync.Mutex
	added map[string]time.Time
	queue []seenID // in the order added
}

type seenID struct {
	id string
	at time.Time
}

// Seen reports whether id was added within the window before now.
func (d *Dedup) Seen(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	at, ok := d.added[id]
	return ok && now.Sub(at) < d.window()
}

// Add remembers id as handled at now.
func (d *Dedup) Add(id string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.added == nil {
		d.added = map[string]time.Time{}
	}
	d.added[id] = now
	d.queue = append(d.queue, seenID{id, now})
	d.expire(now)
}

// Len is how many IDs are remembered.
func (d *Dedup) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.added)
}

func (d *Dedup) window() time.Duration {
	if d.Window > 0 {
		return d.Window
	}
	return DefaultDedupWindow
}

// expire forgets the IDs older than the window, and the oldest beyond Max.
func (d *Dedup) expire(now time.Time) {
	max := d.Max
	if max <= 0 {
		max = DefaultDedupMax
	}
	n := 0
	for ; n < len(d.queue); n++ {
		e := d.queue[n]
		if now.Sub(e.at) < d.window() && len(d.added) <= max {
			break
		}
		// An ID added again later has a newer entry further on.
		if at, ok := d.added[e.id]; ok && at.Equal(e.at) {
			delete(d.added, e.id)
		}
	}
	if n > 0 {
		d.queue = append(d.queue[:0:0], d.queue[n:]...)
	}
}
