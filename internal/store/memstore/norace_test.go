//go:build !race

package memstore

const race, Race = false, false
