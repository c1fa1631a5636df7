//go:build !race

package memstore_test

const race = false
