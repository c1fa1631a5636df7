//go:build tools

// Package tools pins etcd so `go mod tidy` keeps its requirements.
package tools

import _ "go.etcd.io/etcd/server/v3"
