package memstore

// tree is an ordered map, a B-tree, on which every table and index of the
// store is built. Its nodes carry a generation: a write changes in place
// the nodes of its own generation and copies the others on its way
// (path copying), so a copy of the tree value made before is a version
// that the write leaves as it was. A transaction writes in the store's
// one generation, in place, and keeps an undo log of what it replaced
// (set, delete), from which a rollback restores the tree and a reader
// that comes while the transaction is open gets the committed version
// (revert, on a copy of the tree, in a generation of its own).
type tree[K, V any] struct {
	root *bnode[K, V]
	n    int
	cmp  func(K, K) int
	// ver is the sequence number of the last transaction that wrote the
	// tree: a version of the tree with the same ver holds the same
	// entries.
	ver uint64
	// log is the running transaction's undo log, shared by every copy of
	// the tree value, as are the nodes free for reuse.
	log *undoLog[K, V]
}

// undoLog is what a transaction replaced in a tree, oldest first, and the
// tree's ver before it; and the nodes the tree dropped, for its next
// writes.
type undoLog[K, V any] struct {
	seq     uint64 // the transaction the log is of
	ver     uint64
	entries []undone[K, V]
	free    []*bnode[K, V]
}

// maxFree bounds the nodes a tree keeps for reuse.
const maxFree = 16

// alloc is a write in generation gen: it changes the nodes of gen in
// place, copies the others into nodes of gen, and reuses the nodes of gen
// it drops (no version but its own holds them).
type alloc[K, V any] struct {
	gen uint64
	log *undoLog[K, V]
}

// node returns an empty node of a's generation.
func (a *alloc[K, V]) node() *bnode[K, V] {
	f := a.log.free
	if len(f) == 0 {
		return &bnode[K, V]{gen: a.gen}
	}
	x := f[len(f)-1]
	a.log.free = f[:len(f)-1]
	x.gen = a.gen
	return x
}

// drop takes x, which the write removed from its tree, for reuse if it
// is of a's generation.
func (a *alloc[K, V]) drop(x *bnode[K, V]) {
	if x.gen != a.gen || len(a.log.free) == maxFree {
		return
	}
	*x = bnode[K, V]{}
	a.log.free = append(a.log.free, x)
}

// undone is an entry as it was before a write: v at k, or no entry (had
// false).
type undone[K, V any] struct {
	k   K
	v   V
	had bool
}

// writer is a transaction as the trees see it.
type writer struct {
	// gen is the generation whose nodes it changes in place.
	gen uint64
	// seq numbers it, for the trees' ver and their undo logs.
	seq uint64
	// logs are the trees it wrote, whose undo logs are its.
	logs []logged
}

// logged is a tree with entries in a transaction's undo log.
type logged interface {
	// revert undoes the transaction's writes, newest first, in
	// generation gen, on the tree value it is called on.
	revert(gen uint64)
	// settle forgets the undo log.
	settle()
	// loggedIn reports whether the log is transaction seq's.
	loggedIn(seq uint64) bool
}

// A node holds at most maxKeys entries and, but for the root, at least
// minKeys.
const (
	degree  = 8
	maxKeys = 2*degree - 1
	minKeys = degree - 1
)

type bnode[K, V any] struct {
	gen  uint64
	n    int
	leaf bool
	keys [maxKeys]K
	vals [maxKeys]V
	kids [maxKeys + 1]*bnode[K, V]
}

func newTree[K, V any](cmp func(K, K) int) tree[K, V] {
	return tree[K, V]{cmp: cmp, log: &undoLog[K, V]{}}
}

// set puts v at k for transaction w, logging what it replaces, and
// returns it.
func (t *tree[K, V]) set(w *writer, k K, v V) (old V, replaced bool) {
	old, replaced = t.put(w.gen, k, v)
	t.logged(w, k, old, replaced)
	return old, replaced
}

// delete removes k for transaction w, logging its value, and returns it.
func (t *tree[K, V]) delete(w *writer, k K) (old V, ok bool) {
	if old, ok = t.del(w.gen, k); ok {
		t.logged(w, k, old, true)
	}
	return old, ok
}

// logged notes in the undo log that w replaced v at k (none if !had).
func (t *tree[K, V]) logged(w *writer, k K, v V, had bool) {
	l := t.log
	if l.seq != w.seq {
		l.seq, l.ver, l.entries = w.seq, t.ver, l.entries[:0]
		w.logs = append(w.logs, t)
	}
	t.ver = w.seq
	l.entries = append(l.entries, undone[K, V]{k, v, had})
}

func (t *tree[K, V]) revert(gen uint64) {
	es := t.log.entries
	for i := len(es) - 1; i >= 0; i-- {
		if e := &es[i]; e.had {
			t.put(gen, e.k, e.v)
		} else {
			t.del(gen, e.k)
		}
	}
	t.ver = t.log.ver
}

func (t *tree[K, V]) settle() {
	l := t.log
	clear(l.entries) // what they hold may be garbage now
	if cap(l.entries) > 1024 {
		l.entries = nil
	}
	l.entries, l.seq = l.entries[:0], 0
}

func (t *tree[K, V]) loggedIn(seq uint64) bool { return t.log.seq == seq }

// Len is the number of entries.
func (t *tree[K, V]) Len() int { return t.n }

// get returns the value of k.
func (t *tree[K, V]) get(k K) (v V, ok bool) {
	for x := t.root; x != nil; {
		i, found := x.search(k, t.cmp)
		if found {
			return x.vals[i], true
		}
		if x.leaf {
			break
		}
		x = x.kids[i]
	}
	return v, false
}

// has reports whether k is in t.
func (t *tree[K, V]) has(k K) bool {
	_, ok := t.get(k)
	return ok
}

// search returns where k is in x, or where it would go.
func (x *bnode[K, V]) search(k K, cmp func(K, K) int) (int, bool) {
	lo, hi := 0, x.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := cmp(x.keys[m], k); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// own returns x if a may change it, else a copy that it may.
func (x *bnode[K, V]) own(a *alloc[K, V]) *bnode[K, V] {
	if x.gen == a.gen {
		return x
	}
	c := a.node()
	*c = *x
	c.gen = a.gen
	return c
}

// put puts v at k in generation gen and returns the value it replaced.
func (t *tree[K, V]) put(gen uint64, k K, v V) (old V, replaced bool) {
	a := &alloc[K, V]{gen, t.log}
	if t.root == nil {
		r := a.node()
		r.n, r.leaf = 1, true
		r.keys[0], r.vals[0] = k, v
		t.root, t.n = r, 1
		return old, false
	}
	r := t.root.own(a)
	if r.n == maxKeys {
		up := a.node()
		up.kids[0] = r
		up.split(a, 0)
		r = up
	}
	t.root = r
	for x := r; ; {
		i, found := x.search(k, t.cmp)
		if found {
			old, x.vals[i] = x.vals[i], v
			return old, true
		}
		if x.leaf {
			copy(x.keys[i+1:x.n+1], x.keys[i:x.n])
			copy(x.vals[i+1:x.n+1], x.vals[i:x.n])
			x.keys[i], x.vals[i] = k, v
			x.n++
			t.n++
			return old, false
		}
		c := x.kids[i].own(a)
		x.kids[i] = c
		if c.n == maxKeys {
			x.split(a, i)
			switch d := t.cmp(k, x.keys[i]); {
			case d == 0:
				old, x.vals[i] = x.vals[i], v
				return old, true
			case d > 0:
				i++
			}
		}
		x = x.kids[i]
	}
}

// split splits x's full child i (which a owns) around its middle entry,
// which moves up into x.
func (x *bnode[K, V]) split(a *alloc[K, V], i int) {
	y := x.kids[i]
	z := a.node()
	z.n, z.leaf = minKeys, y.leaf
	copy(z.keys[:], y.keys[degree:])
	copy(z.vals[:], y.vals[degree:])
	if !y.leaf {
		copy(z.kids[:], y.kids[degree:])
	}
	mk, mv := y.keys[minKeys], y.vals[minKeys]
	y.n = minKeys
	y.clearFrom(minKeys)
	copy(x.keys[i+1:x.n+1], x.keys[i:x.n])
	copy(x.vals[i+1:x.n+1], x.vals[i:x.n])
	copy(x.kids[i+2:x.n+2], x.kids[i+1:x.n+1])
	x.keys[i], x.vals[i], x.kids[i+1] = mk, mv, z
	x.n++
}

// clearFrom zeroes the entries from i on (and the children after them),
// so a node keeps nothing alive that it no longer holds.
func (x *bnode[K, V]) clearFrom(i int) {
	clear(x.keys[i:])
	clear(x.vals[i:])
	clear(x.kids[i+1:])
}

// del removes k in generation gen and returns its value.
func (t *tree[K, V]) del(gen uint64, k K) (old V, ok bool) {
	if !t.has(k) {
		return old, false // nothing to copy
	}
	a := &alloc[K, V]{gen, t.log}
	r := t.root.own(a)
	old = r.remove(a, k, t.cmp)
	if r.n == 0 {
		empty := r
		r = r.kids[0] // nil for a leaf
		a.drop(empty)
	}
	t.root = r
	t.n--
	return old, true
}

// remove removes k, which is in x's subtree, from it; x is owned by a
// and, unless it is the root, holds more than minKeys entries.
func (x *bnode[K, V]) remove(a *alloc[K, V], k K, cmp func(K, K) int) V {
	for {
		i, found := x.search(k, cmp)
		if x.leaf {
			old := x.vals[i]
			x.removeAt(i)
			return old
		}
		if !found {
			x = x.kids[x.fill(a, i)]
			continue
		}
		old := x.vals[i]
		switch {
		case x.kids[i].n > minKeys:
			l := x.kids[i].own(a)
			x.kids[i] = l
			x.keys[i], x.vals[i] = l.popMax(a)
			return old
		case x.kids[i+1].n > minKeys:
			r := x.kids[i+1].own(a)
			x.kids[i+1] = r
			x.keys[i], x.vals[i] = r.popMin(a)
			return old
		}
		x.merge(a, i)
		x = x.kids[i]
	}
}

// removeAt removes entry i of leaf x.
func (x *bnode[K, V]) removeAt(i int) {
	copy(x.keys[i:], x.keys[i+1:x.n])
	copy(x.vals[i:], x.vals[i+1:x.n])
	x.n--
	x.clearFrom(x.n)
}

// popMax removes and returns the largest entry of x's subtree (x as in
// remove).
func (x *bnode[K, V]) popMax(a *alloc[K, V]) (K, V) {
	for !x.leaf {
		x = x.kids[x.fill(a, x.n)]
	}
	k, v := x.keys[x.n-1], x.vals[x.n-1]
	x.removeAt(x.n - 1)
	return k, v
}

// popMin removes and returns the smallest entry of x's subtree.
func (x *bnode[K, V]) popMin(a *alloc[K, V]) (K, V) {
	for !x.leaf {
		x = x.kids[x.fill(a, 0)]
	}
	k, v := x.keys[0], x.vals[0]
	x.removeAt(0)
	return k, v
}

// fill makes x's child i own-able and fuller than minKeys, taking an
// entry from a sibling or merging it with one, and returns where that
// child is now.
func (x *bnode[K, V]) fill(a *alloc[K, V], i int) int {
	c := x.kids[i].own(a)
	x.kids[i] = c
	switch {
	case c.n > minKeys:
		return i
	case i > 0 && x.kids[i-1].n > minKeys:
		l := x.kids[i-1].own(a)
		x.kids[i-1] = l
		copy(c.keys[1:c.n+1], c.keys[:c.n])
		copy(c.vals[1:c.n+1], c.vals[:c.n])
		copy(c.kids[1:c.n+2], c.kids[:c.n+1])
		c.keys[0], c.vals[0], c.kids[0] = x.keys[i-1], x.vals[i-1], l.kids[l.n]
		c.n++
		x.keys[i-1], x.vals[i-1] = l.keys[l.n-1], l.vals[l.n-1]
		l.n--
		l.clearFrom(l.n)
		return i
	case i < x.n && x.kids[i+1].n > minKeys:
		r := x.kids[i+1].own(a)
		x.kids[i+1] = r
		c.keys[c.n], c.vals[c.n], c.kids[c.n+1] = x.keys[i], x.vals[i], r.kids[0]
		c.n++
		x.keys[i], x.vals[i] = r.keys[0], r.vals[0]
		copy(r.keys[:], r.keys[1:r.n])
		copy(r.vals[:], r.vals[1:r.n])
		copy(r.kids[:], r.kids[1:r.n+1])
		r.n--
		r.clearFrom(r.n)
		return i
	case i < x.n:
		x.merge(a, i)
		return i
	default:
		x.merge(a, i-1)
		return i - 1
	}
}

// merge joins x's children i and i+1 and the entry between them into
// child i (owned by a); a takes child i+1.
func (x *bnode[K, V]) merge(a *alloc[K, V], i int) {
	l := x.kids[i].own(a)
	r := x.kids[i+1]
	l.keys[l.n], l.vals[l.n] = x.keys[i], x.vals[i]
	copy(l.keys[l.n+1:], r.keys[:r.n])
	copy(l.vals[l.n+1:], r.vals[:r.n])
	if !l.leaf {
		copy(l.kids[l.n+1:], r.kids[:r.n+1])
	}
	l.n += 1 + r.n
	x.kids[i] = l
	copy(x.keys[i:], x.keys[i+1:x.n])
	copy(x.vals[i:], x.vals[i+1:x.n])
	copy(x.kids[i+1:], x.kids[i+2:x.n+1])
	x.n--
	x.clearFrom(x.n)
	a.drop(r)
}

// ascend calls fn with the entries from lo on (all of them if lo is
// nil), in order, until fn returns false.
func (t *tree[K, V]) ascend(lo *K, fn func(K, V) bool) {
	if t.root != nil {
		t.root.ascend(lo, t.cmp, fn)
	}
}

func (x *bnode[K, V]) ascend(lo *K, cmp func(K, K) int, fn func(K, V) bool) bool {
	i := 0
	if lo != nil {
		i, _ = x.search(*lo, cmp)
	}
	for ; i < x.n; i++ {
		if !x.leaf {
			if !x.kids[i].ascend(lo, cmp, fn) {
				return false
			}
			lo = nil
		}
		if !fn(x.keys[i], x.vals[i]) {
			return false
		}
	}
	return x.leaf || x.kids[x.n].ascend(lo, cmp, fn)
}

// descend calls fn with the entries up to hi (all of them if hi is nil),
// in reverse order, until fn returns false.
func (t *tree[K, V]) descend(hi *K, fn func(K, V) bool) {
	if t.root != nil {
		t.root.descend(hi, t.cmp, fn)
	}
}

func (x *bnode[K, V]) descend(hi *K, cmp func(K, K) int, fn func(K, V) bool) bool {
	i := x.n - 1
	if hi != nil {
		j, found := x.search(*hi, cmp)
		if i = j - 1; found {
			i = j
		}
	}
	if !x.leaf {
		if !x.kids[i+1].descend(hi, cmp, fn) {
			return false
		}
	}
	for ; i >= 0; i-- {
		if !fn(x.keys[i], x.vals[i]) {
			return false
		}
		if !x.leaf && !x.kids[i].descend(nil, cmp, fn) {
			return false
		}
	}
	return true
}

// runs calls fn with every entry in order, in runs of consecutive
// entries of a node: a leaf's all at once, an inner node's one by one.
// For reads of a whole table, with one call a run rather than an entry.
func (t *tree[K, V]) runs(fn func(keys []K, vals []V)) {
	if t.root != nil {
		t.root.runs(fn)
	}
}

func (x *bnode[K, V]) runs(fn func(keys []K, vals []V)) {
	if x.leaf {
		fn(x.keys[:x.n], x.vals[:x.n])
		return
	}
	for i := range x.n {
		x.kids[i].runs(fn)
		fn(x.keys[i:i+1], x.vals[i:i+1])
	}
	x.kids[x.n].runs(fn)
}

// each calls fn with every entry in order until fn returns false.
func (t *tree[K, V]) each(fn func(K, V) bool) { t.ascend(nil, fn) }
