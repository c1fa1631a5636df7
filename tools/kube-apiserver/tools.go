//go:build tools

// Package tools pins kube-apiserver so `go mod tidy` keeps its requirements.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
