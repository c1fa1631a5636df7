//go:build tools

// Package tools pins kubeconform so `go mod tidy` keeps its requirements.
package tools

import _ "github.com/yannh/kubeconform/cmd/kubeconform"
