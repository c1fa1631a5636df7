package memstore

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTree: a tree holds what a map holds, in order, after any sequence
// of sets and deletes, and a version copied before later writes (made in
// another generation) never changes.
func TestTree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	tr := newTree[int, int](cmp.Compare[int])
	want := map[int]int{}
	type version struct {
		tr   tree[int, int]
		want map[int]int
	}
	var versions []version
	gen := uint64(1)
	steps := 200_000
	if race {
		steps = 50_000
	}
	for step := range steps {
		if step%997 == 0 {
			// A version: later writes must leave it as it is.
			versions = append(versions, version{tr, maps.Clone(want)})
			gen++
		}
		k := rng.IntN(3000)
		if rng.IntN(3) == 0 {
			old, ok := tr.del(gen, k)
			wv, wok := want[k]
			if ok != wok || old != wv {
				t.Fatalf("step %d: delete %d: %d %v, want %d %v", step, k, old, ok, wv, wok)
			}
			delete(want, k)
		} else {
			old, ok := tr.put(gen, k, step)
			wv, wok := want[k]
			if ok != wok || old != wv {
				t.Fatalf("step %d: set %d: %d %v, want %d %v", step, k, old, ok, wv, wok)
			}
			want[k] = step
		}
		if step%5003 == 0 {
			checkTree(t, &tr, want)
		}
	}
	checkTree(t, &tr, want)
	for _, v := range versions {
		checkTree(t, &v.tr, v.want)
	}
	// Delete everything: the tree is empty again.
	for k := range want {
		tr.del(gen, k)
	}
	if tr.root != nil || tr.Len() != 0 {
		t.Fatalf("emptied tree: root %v, %d entries", tr.root, tr.Len())
	}
}

// TestTreeUndo: transactions write a tree in place, logging what they
// replace: one rolled back leaves the tree as it was (its entries and
// ver); a copy of the tree reverted in the middle of one, after which
// the transaction writes in a new generation, is the tree as it was,
// whatever the transaction writes after.
func TestTreeUndo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	tr := newTree[int, int](cmp.Compare[int])
	want := map[int]int{}
	gens := uint64(1)
	w := &writer{gen: gens}
	txs := uint64(300)
	if race {
		txs = 100
	}
	for seq := uint64(1); seq <= txs; seq++ {
		w.seq = seq
		committed, ver := maps.Clone(want), tr.ver
		var frozen *tree[int, int]
		for range rng.IntN(300) {
			if k := rng.IntN(2000); rng.IntN(3) == 0 {
				tr.delete(w, k)
				delete(want, k)
			} else {
				tr.set(w, k, int(seq))
				want[k] = int(seq)
			}
			if frozen == nil && rng.IntN(100) == 0 {
				fz := tr
				if fz.loggedIn(seq) {
					gens++
					fz.revert(gens)
				}
				gens++
				w.gen, frozen = gens, &fz
			}
		}
		if frozen != nil {
			checkTree(t, frozen, committed)
			if frozen.ver != ver {
				t.Fatalf("transaction %d: the copy's ver is %d, want %d", seq, frozen.ver, ver)
			}
		}
		if rng.IntN(4) == 0 {
			for _, l := range w.logs {
				l.revert(w.gen)
			}
			want = committed
			if tr.ver != ver {
				t.Fatalf("transaction %d rolled back: ver %d, want %d", seq, tr.ver, ver)
			}
		}
		for _, l := range w.logs {
			l.settle()
		}
		w.logs = w.logs[:0]
		checkTree(t, &tr, want)
	}
}

// checkTree checks tr against want: its entries, both orders, ranges from
// a key, and the B-tree's shape.
func checkTree(t *testing.T, tr *tree[int, int], want map[int]int) {
	t.Helper()
	keys := slices.Sorted(maps.Keys(want))
	if tr.Len() != len(keys) {
		t.Fatalf("%d entries, want %d", tr.Len(), len(keys))
	}
	var got []int
	tr.each(func(k, v int) bool {
		if want[k] != v {
			t.Fatalf("value of %d: %d, want %d", k, v, want[k])
		}
		got = append(got, k)
		return true
	})
	if !slices.Equal(got, keys) {
		t.Fatalf("ascending: %d keys, want %d", len(got), len(keys))
	}
	for _, lo := range []int{-1, 0, 7, 1500, 2999, 4000} {
		var from, down []int
		tr.ascend(&lo, func(k, _ int) bool { from = append(from, k); return len(from) < 50 })
		tr.descend(&lo, func(k, _ int) bool { down = append(down, k); return len(down) < 50 })
		i, _ := slices.BinarySearch(keys, lo)
		if wantFrom := keys[i:min(len(keys), i+50)]; !slices.Equal(from, wantFrom) {
			t.Fatalf("ascend from %d: %v, want %v", lo, from, wantFrom)
		}
		j, found := slices.BinarySearch(keys, lo)
		if found {
			j++
		}
		wantDown := slices.Clone(keys[max(0, j-50):j])
		slices.Reverse(wantDown)
		if !slices.Equal(down, wantDown) {
			t.Fatalf("descend from %d: %v, want %v", lo, down, wantDown)
		}
	}
	for _, k := range keys[:min(len(keys), 100)] {
		if v, ok := tr.get(k); !ok || v != want[k] {
			t.Fatalf("get %d: %d %v", k, v, ok)
		}
	}
	if tr.root != nil {
		checkNode(t, tr.root, true, nil, nil)
	}
}

// checkNode checks a subtree's shape: entry counts, order within bounds,
// every leaf at the same depth; it returns the depth.
func checkNode(t *testing.T, x *bnode[int, int], root bool, lo, hi *int) int {
	t.Helper()
	if x.n > maxKeys || (!root && x.n < minKeys) || x.n == 0 {
		t.Fatalf("a node holds %d entries", x.n)
	}
	for i := range x.n {
		if (i > 0 && x.keys[i-1] >= x.keys[i]) || (lo != nil && x.keys[i] <= *lo) || (hi != nil && x.keys[i] >= *hi) {
			t.Fatalf("keys out of order: %v", x.keys[:x.n])
		}
	}
	for i := x.n; i < maxKeys; i++ {
		if x.keys[i] != 0 || x.vals[i] != 0 {
			t.Fatal("a node keeps an entry it no longer holds")
		}
	}
	if x.leaf {
		for _, k := range x.kids {
			if k != nil {
				t.Fatal("a leaf has a child")
			}
		}
		return 1
	}
	depth := -1
	for i := 0; i <= x.n; i++ {
		var l, h *int
		if i > 0 {
			l = &x.keys[i-1]
		} else {
			l = lo
		}
		if i < x.n {
			h = &x.keys[i]
		} else {
			h = hi
		}
		d := checkNode(t, x.kids[i], false, l, h)
		if depth >= 0 && d != depth {
			t.Fatal("leaves at different depths")
		}
		depth = d
	}
	for i := x.n + 1; i <= maxKeys; i++ {
		if x.kids[i] != nil {
			t.Fatal("a node keeps a child it no longer holds")
		}
	}
	return depth + 1
}

// TestTables: state.tables lists every tree of the state, once: a reader
// that comes while an Update is open reverts the trees it lists.
func TestTables(t *testing.T) {
	trees := 0
	var count func(reflect.Type)
	count = func(rt reflect.Type) {
		for i := range rt.NumField() {
			switch f := rt.Field(i); {
			case strings.HasPrefix(f.Type.Name(), "tree["):
				trees++
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				count(f.Type)
			}
		}
	}
	count(reflect.TypeFor[state]())
	listed := newState().tables()
	seen := map[logged]bool{}
	for _, tr := range listed {
		seen[tr] = true
	}
	if len(seen) != len(listed) || len(listed) != trees {
		t.Fatalf("tables lists %d trees (%d distinct); the state has %d", len(listed), len(seen), trees)
	}
}
