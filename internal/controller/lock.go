package controller

import (
	"context"
	"sync"
)

// lock takes the plan lock for background work (a node's transition, a
// replan) and first answers the creates waiting for it: a client waits on
// its create, which must not queue behind every step of the fleet.
func (c *Controller) lock(ctx context.Context) {
	c.mu.Lock()
	c.flushCreates(ctx)
}

// lockUnless is lock unless done is closed first (the work the caller
// waits for was done by another holder); it reports whether it took the
// lock.
func (c *Controller) lockUnless(ctx context.Context, done <-chan struct{}) bool {
	if !c.mu.lockOr(done) {
		return false
	}
	c.flushCreates(ctx)
	return true
}

// planLock is the plan lock: a mutex (a channel of one token, so its
// waiters queue in order) that a waiter can stop waiting for. Creates and
// transitions queue their work and wait for the lock; whoever holds it
// does every queued item, and a waiter whose item is done leaves the
// queue (lockOr) rather than taking the lock only to find nothing to do:
// a busy fleet's thousands of such empty turns were most of the wait of
// a create.
type planLock struct{ token chan struct{} }

func newPlanLock() planLock { return planLock{token: make(chan struct{}, 1)} }

func (l planLock) Lock() { l.token <- struct{}{} }

func (l planLock) Unlock() { <-l.token }

// lockOr takes the lock, unless done is closed first; it reports whether
// it took it.
func (l planLock) lockOr(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
	}
	select {
	case l.token <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// batchQueue holds work waiting for the next holder of the plan lock, who
// takes all of it at once.
type batchQueue[T any] struct {
	mu    sync.Mutex
	items []T
}

func (q *batchQueue[T]) push(t T) {
	q.mu.Lock()
	q.items = append(q.items, t)
	q.mu.Unlock()
}

func (q *batchQueue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

func (q *batchQueue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
