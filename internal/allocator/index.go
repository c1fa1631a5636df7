package allocator

import (
	"hash/maphash"
)

// idIndex maps IDs to their position in a snapshot slice. It does what a
// map[string]int32 does for the planner's joins (a node's machine and
// cluster), at a fraction of the cost on a million-GPU fleet: an
// open-addressing table of 8-byte slots, each a 32-bit hash tag and a
// position, so a lookup touches one slot and, to confirm a tag match, the
// ID it names. Building one per plan keeps Compute free of state.
type idIndex struct {
	seed  maphash.Seed
	id    func(i int) string // the ID at a position, read from the snapshot
	slots []uint64           // tag<<32 | position+1; 0 is empty
	mask  uint64
}

// newIDIndex indexes n IDs, id(i) being the i-th. A repeated ID maps to
// its last position, as repeated map assignments would.
func newIDIndex(n int, id func(i int) string) *idIndex {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	x := &idIndex{seed: maphash.MakeSeed(), id: id, slots: make([]uint64, size), mask: uint64(size - 1)}
	for i := 0; i < n; i++ {
		k := id(i)
		h := maphash.String(x.seed, k)
		tag := h >> 32
		for j := h & x.mask; ; j = (j + 1) & x.mask {
			s := x.slots[j]
			if s == 0 {
				x.slots[j] = tag<<32 | uint64(i+1)
				break
			}
			if s>>32 == tag && id(int(uint32(s)-1)) == k {
				x.slots[j] = tag<<32 | uint64(i+1)
				break
			}
		}
	}
	return x
}

// find returns the position of id, or -1.
func (x *idIndex) find(id string) int32 {
	h := maphash.String(x.seed, id)
	tag := h >> 32
	for j := h & x.mask; ; j = (j + 1) & x.mask {
		s := x.slots[j]
		if s == 0 {
			return -1
		}
		if s>>32 == tag && x.id(int(uint32(s)-1)) == id {
			return int32(uint32(s) - 1)
		}
	}
}
