package queues

import (
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Refusals reports each permission a cluster refused the queue
// integrations, once, through the controller's access record (a
// PermissionMissing event the operator and the tenant see): the
// integrations are courtesies, so a refusal never stops anything else.
type Refusals struct {
	ClusterID string
	// Report is the controller's RecordAccess (nil: not reported).
	Report func(driver.AccessReport)

	mu   sync.Mutex // the watches report from their own goroutines
	seen map[string]bool
}

// Check reports permission as missing, with what the tenant loses
// (effect), when err is the API's Forbidden, and returns err.
func (r *Refusals) Check(err error, permission, effect string) error {
	if !apierrors.IsForbidden(err) || r.Report == nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[permission] {
		return err
	}
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[permission] = true
	r.Report(driver.AccessReport{ClusterID: r.ClusterID, Missing: []domain.MissingPermission{{
		Permission: permission, Effect: effect, Detail: err.Error()}}})
	return err
}

// Permission names verb on a resource of gvr as the access record does:
// "patch workloads.kueue.x-k8s.io/status" (a core resource has no group).
func Permission(verb string, gvr schema.GroupVersionResource, sub string) string {
	p := verb + " " + gvr.Resource
	if gvr.Group != "" {
		p += "." + gvr.Group
	}
	if sub != "" {
		p += "/" + sub
	}
	return p
}
