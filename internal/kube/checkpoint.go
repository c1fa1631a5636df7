package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sparecap/sparecap/internal/domain"
)

// reportTimeout bounds one report: it is a courtesy, never waited for.
const reportTimeout = 10 * time.Second

// CheckpointReporter is what `sparecap run` in a pod uses to tell the
// control plane when its job last saved a checkpoint: it writes the time
// to the pod's sparecap.dev/last-checkpoint annotation (a merge patch of
// that one key), which the driver's pod watch reads (Load). The pod's
// service account needs patch on pods in its namespace
// (docs/workloads.md).
func CheckpointReporter(cfg *rest.Config, namespace, pod string) (func(ctx context.Context, at time.Time) error, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint reporter: %w", err)
	}
	return func(ctx context.Context, at time.Time) error {
		ctx, cancel := context.WithTimeout(ctx, reportTimeout)
		defer cancel()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			domain.AnnotationLastCheckpoint: at.UTC().Format(time.RFC3339)}}})
		_, err := cs.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sparecap-run"})
		return err
	}, nil
}
