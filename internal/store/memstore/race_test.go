//go:build race

package memstore_test

// race: the race detector is on, which slows SQLite's interpreter down
// many times: the random test runs fewer steps.
const race = true
