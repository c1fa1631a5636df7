//go:build tools

// Package tools pins KubeRay's operator so `go mod tidy` keeps its
// requirements.
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
