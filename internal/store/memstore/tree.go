package memstore

// tree is an ordered map that is persistent: a copy of the tree value is
// a version of it that later writes to the original never change. Every
// table and index of the store is one, so a transaction writes to its own
// version of the database while readers go on reading the committed one,
// and dropping the version is the rollback.
//
// It is a B-tree whose nodes are copied on write (path copying): a write
// copies the nodes from the root to the entry it changes, unless they
// already belong to the writer's generation (gen), in which case it
// changes them in place. A transaction draws a new generation, so it
// copies a node once however often it writes to it, and never changes a
// node a committed version holds.
type tree[K, V any] struct {
	root *bnode[K, V]
	n    int
	cmp  func(K, K) int
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

func newTree[K, V any](cmp func(K, K) int) tree[K, V] { return tree[K, V]{cmp: cmp} }

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

// own returns x if generation gen may change it, else a copy that it may.
func (x *bnode[K, V]) own(gen uint64) *bnode[K, V] {
	if x.gen == gen {
		return x
	}
	c := *x
	c.gen = gen
	return &c
}

// set puts v at k in generation gen and returns the value it replaced.
func (t *tree[K, V]) set(gen uint64, k K, v V) (old V, replaced bool) {
	if t.root == nil {
		r := &bnode[K, V]{gen: gen, n: 1, leaf: true}
		r.keys[0], r.vals[0] = k, v
		t.root, t.n = r, 1
		return old, false
	}
	r := t.root.own(gen)
	if r.n == maxKeys {
		up := &bnode[K, V]{gen: gen}
		up.kids[0] = r
		up.split(gen, 0)
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
		c := x.kids[i].own(gen)
		x.kids[i] = c
		if c.n == maxKeys {
			x.split(gen, i)
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

// split splits x's full child i (which gen owns) around its middle entry,
// which moves up into x.
func (x *bnode[K, V]) split(gen uint64, i int) {
	y := x.kids[i]
	z := &bnode[K, V]{gen: gen, n: minKeys, leaf: y.leaf}
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

// delete removes k in generation gen and returns its value.
func (t *tree[K, V]) delete(gen uint64, k K) (old V, ok bool) {
	if !t.has(k) {
		return old, false // nothing to copy
	}
	r := t.root.own(gen)
	old = r.remove(gen, k, t.cmp)
	switch {
	case r.n > 0:
	case r.leaf:
		r = nil
	default:
		r = r.kids[0]
	}
	t.root = r
	t.n--
	return old, true
}

// remove removes k, which is in x's subtree, from it; x is owned by gen
// and, unless it is the root, holds more than minKeys entries.
func (x *bnode[K, V]) remove(gen uint64, k K, cmp func(K, K) int) V {
	for {
		i, found := x.search(k, cmp)
		if x.leaf {
			old := x.vals[i]
			x.removeAt(i)
			return old
		}
		if !found {
			x = x.kids[x.fill(gen, i)]
			continue
		}
		old := x.vals[i]
		switch {
		case x.kids[i].n > minKeys:
			l := x.kids[i].own(gen)
			x.kids[i] = l
			x.keys[i], x.vals[i] = l.popMax(gen)
			return old
		case x.kids[i+1].n > minKeys:
			r := x.kids[i+1].own(gen)
			x.kids[i+1] = r
			x.keys[i], x.vals[i] = r.popMin(gen)
			return old
		}
		x.merge(gen, i)
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
func (x *bnode[K, V]) popMax(gen uint64) (K, V) {
	for !x.leaf {
		x = x.kids[x.fill(gen, x.n)]
	}
	k, v := x.keys[x.n-1], x.vals[x.n-1]
	x.removeAt(x.n - 1)
	return k, v
}

// popMin removes and returns the smallest entry of x's subtree.
func (x *bnode[K, V]) popMin(gen uint64) (K, V) {
	for !x.leaf {
		x = x.kids[x.fill(gen, 0)]
	}
	k, v := x.keys[0], x.vals[0]
	x.removeAt(0)
	return k, v
}

// fill makes x's child i own-able and fuller than minKeys, taking an
// entry from a sibling or merging it with one, and returns where that
// child is now.
func (x *bnode[K, V]) fill(gen uint64, i int) int {
	c := x.kids[i].own(gen)
	x.kids[i] = c
	switch {
	case c.n > minKeys:
		return i
	case i > 0 && x.kids[i-1].n > minKeys:
		l := x.kids[i-1].own(gen)
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
		r := x.kids[i+1].own(gen)
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
		x.merge(gen, i)
		return i
	default:
		x.merge(gen, i-1)
		return i - 1
	}
}

// merge joins x's children i and i+1 and the entry between them into
// child i (owned by gen).
func (x *bnode[K, V]) merge(gen uint64, i int) {
	l := x.kids[i].own(gen)
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
