package domain

import (
	"cmp"
	"time"
)

// ByCreated is the order the store lists rows in, and the allocator keeps
// them in: by creation time, a zero time first (stored as NULL: NULLS
// FIRST), then by ID.
func ByCreated(ta time.Time, ia string, tb time.Time, ib string) int {
	if za, zb := ta.IsZero(), tb.IsZero(); za != zb {
		if za {
			return -1
		}
		return 1
	}
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	return cmp.Compare(ia, ib)
}
