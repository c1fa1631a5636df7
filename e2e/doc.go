// Package e2e holds the end-to-end tests of sparecap: they build the real
// binary once, run `sparecap server` as a subprocess on a small fleet with a
// sped-up clock (on SQLite and on PostgreSQL), and drive it through the CLI
// binary and the Go API client, including a SIGKILL of the server in the
// middle of a drain and a restart on the same data.
//
// Run them with `go test ./e2e/`. PostgreSQL must be reachable (see
// internal/store/postgres.TestDSN); when it is not, the PostgreSQL tests fail
// rather than skip.
package e2e
