package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// TestPodReporter: `sparecap run` reports checkpoints only in a pod (the
// Downward API's POD_NAME and POD_NAMESPACE), says so once when it cannot
// reach the API there, and stays silent outside a pod.
func TestPodReporter(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	ok := func() (*preempt.PodReporter, error) {
		return &preempt.PodReporter{Server: "https://127.0.0.1:6443"}, nil
	}
	broken := func() (*preempt.PodReporter, error) {
		return nil, errors.New("unable to load in-cluster configuration")
	}
	pod := map[string]string{"POD_NAME": "train-0", "POD_NAMESPACE": "ml"}

	var log bytes.Buffer
	if r := podReporter(&log, env(nil), ok); r != nil || log.Len() != 0 {
		t.Fatalf("outside a pod: reporter %v, log %q", r != nil, log.String())
	}
	if r := podReporter(&log, env(pod), broken); r != nil || !strings.Contains(log.String(), "not reported to pod ml/train-0: unable to load") {
		t.Fatalf("in a pod without the API: reporter %v, log %q", r != nil, log.String())
	}
	log.Reset()
	if r := podReporter(&log, env(pod), ok); r == nil || log.Len() != 0 {
		t.Fatalf("in a pod: reporter %v, log %q", r != nil, log.String())
	}
}
