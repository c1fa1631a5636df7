package allocator

import (
	"runtime"
	"sync"
)

// parallelMin is the fewest items worth a goroutine: below it a plan's
// index work takes less than the goroutines cost to start.
const parallelMin = 8192

// parallel calls fn on consecutive ranges [lo, hi) covering 0..n, on up to
// GOMAXPROCS goroutines (at most 4), each range at least parallelMin long;
// fn must write only what its range owns. It returns once all are done.
// The first plan of a leader builds its indexes this way: at a million
// GPUs the joins of 62,877 nodes to their machines and clusters are most
// of that plan, and each lookup is independent of the others.
func parallel(n int, fn func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), 4, n/parallelMin)
	if parts <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// beside starts fn on a goroutine of its own when n (the items it works
// on) is at least parallelMin, else runs it at once, and returns what
// waits for it to end.
func beside(n int, fn func()) (wait func()) {
	if n < parallelMin {
		fn()
		return func() {}
	}
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	return func() { <-done }
}
