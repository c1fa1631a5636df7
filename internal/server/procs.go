package server

import "runtime"

// ExtraProcs is how many more Ps (goroutines running Go code at once) the
// server runs than the CPUs it may use: the store's commit and the
// simulated fleet's log each wait for a disk sync in a system call, and
// a P held by a goroutine inside one runs nothing else until the runtime
// hands it on. With two cores and no extra Ps, a million GPUs coming up
// kept the server at 1.1 cores of 2 with steps waiting to run; with two
// extra, all nodes were ready 14 s after the last create instead of 20
// (docs/perf.md).
const ExtraProcs = 2

// defaultProcs is the runtime's own choice, before SetProcs changes it.
var defaultProcs = runtime.GOMAXPROCS(0)

// SetProcs sets GOMAXPROCS to the CPUs the process may use plus
// ExtraProcs, unless gomaxprocs (the GOMAXPROCS environment variable) is
// set: then the operator's value stands. It returns the value in force.
func SetProcs(gomaxprocs string) int {
	if gomaxprocs != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(defaultProcs + ExtraProcs)
	return defaultProcs + ExtraProcs
}
