package kube

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseLabel parses KEY=VALUE as a node label, checked as Kubernetes
// would.
func ParseLabel(s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q: want KEY=VALUE", s)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "", "", fmt.Errorf("label %q: key: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return "", "", fmt.Errorf("label %q: value: %s", s, strings.Join(errs, "; "))
	}
	return key, value, nil
}

// ParseTaint parses KEY[=VALUE]:EFFECT, as kubectl taint writes it.
func ParseTaint(s string) (Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return Taint{}, fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT", s)
	}
	switch effect {
	case "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return Taint{}, fmt.Errorf("taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return Taint{}, fmt.Errorf("taint %q: key: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return Taint{}, fmt.Errorf("taint %q: value: %s", s, strings.Join(errs, "; "))
	}
	return Taint{Key: key, Value: value, Effect: effect}, nil
}
