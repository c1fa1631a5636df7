package lifecycle

import "container/heap"

// queue is a min-heap of items by due time.
type queue []*item

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].due.At.Before(q[j].due.At) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}

func (q *queue) Push(x any) {
	it := x.(*item)
	it.idx = len(*q)
	*q = append(*q, it)
}

func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	it.idx = -1
	return it
}

func (q *queue) push(it *item)   { heap.Push(q, it) }
func (q *queue) fix(it *item)    { heap.Fix(q, it.idx) }
func (q *queue) remove(it *item) { heap.Remove(q, it.idx) }
func (q *queue) pop() *item      { return heap.Pop(q).(*item) }
