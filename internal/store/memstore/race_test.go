//go:build race

package memstore

// race: the race detector is on, which slows every test down many times
// and SQLite's interpreter most: the random tests run fewer steps (under
// it they look for races; without it, for wrong answers). Race is race
// for the package's external tests.
const race, Race = true, true
