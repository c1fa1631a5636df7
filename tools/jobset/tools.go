//go:build tools

// Package tools pins JobSet's controller so `go mod tidy` keeps its
// requirements.
package tools

import _ "sigs.k8s.io/jobset"
