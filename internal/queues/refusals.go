package queues

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	seen   map[string]bool
}

// Check reports permission as missing, with what the tenant loses
// (effect), when err is the API's Forbidden, and returns err.
func (r *Refusals) Check(err error, permission, effect string) error {
	if !apierrors.IsForbidden(err) || r.Report == nil || r.seen[permission] {
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
