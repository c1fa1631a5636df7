//go:build tools

// Package tools pins kwok so `go mod tidy` keeps its requirements.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
