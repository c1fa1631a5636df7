//go:build tools

// Package tools pins the helm CLI so `go mod tidy` keeps its requirements.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
