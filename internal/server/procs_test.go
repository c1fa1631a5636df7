package server

import (
	"runtime"
	"testing"
)

// TestSetProcs: the server runs ExtraProcs more Ps than the runtime
// would, however often it is set up, unless GOMAXPROCS is set.
func TestSetProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	for range 2 {
		if got := SetProcs(""); got != defaultProcs+ExtraProcs || runtime.GOMAXPROCS(0) != got {
			t.Fatalf("SetProcs: %d in force (%d), want %d", runtime.GOMAXPROCS(0), got, defaultProcs+ExtraProcs)
		}
	}
	runtime.GOMAXPROCS(3)
	if got := SetProcs("3"); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("with GOMAXPROCS=3 set: %d in force", runtime.GOMAXPROCS(0))
	}
}
