package lifecycle

import (
	"errors"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
)

// ErrStale: the node moved on since it was read; the write is dropped and
// the turn reads the node again.
var ErrStale = domain.ErrStale

// IgnoreStale is err, unless it says the node moved on (nothing to do).
func IgnoreStale(err error) error {
	if errors.Is(err, ErrStale) {
		return nil
	}
	return err
}

// CleanupKey is the key of node id's cleanup: it runs apart from the
// node's own steps (see cleanup.go).
func CleanupKey(id string) string { return cleanupPrefix + id }

const cleanupPrefix = "cleanup/"

// CleanupOf is the node whose cleanup key is key, if key is one.
func CleanupOf(key string) (id string, ok bool) { return strings.CutPrefix(key, cleanupPrefix) }

// ProviderError is a failure of the machine provider (an operator's hook,
// say): it is recorded as a lifecycle event of Reason as well as on the
// node.
type ProviderError struct {
	Reason domain.EventReason
	Err    error
}

func (e *ProviderError) Error() string { return e.Err.Error() }
func (e *ProviderError) Unwrap() error { return e.Err }

// ClusterError is a failure of the tenant's cluster (its API refused or
// did not answer): not the machine's fault.
type ClusterError struct{ Err error }

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }
