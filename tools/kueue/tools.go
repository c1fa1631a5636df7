//go:build tools

// Package tools pins Kueue's manager, and the ProvisioningRequest API whose
// CRD the tests install with it, so `go mod tidy` keeps their
// requirements. JobSet and KubeRay are built from tools/jobset and
// tools/kuberay at the versions this module requires.
package tools

import (
	_ "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
