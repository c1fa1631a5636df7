package domain

import (
	"fmt"
	"strings"
	"time"
)

// Access is what sparecap learned of the permissions an attached
// cluster's API grants it: by asking the API when the cluster is attached
// and when a server starts driving it (CheckedAt), and from calls the
// cluster refused since.
type Access struct {
	// CheckedAt is when the permissions were last checked (zero: never).
	CheckedAt time.Time
	// Missing are the permissions found missing, in the order the driver
	// lists them.
	Missing []MissingPermission
}

// MissingPermission is one permission the cluster does not grant.
type MissingPermission struct {
	// Permission is "VERB RESOURCE" ("patch pods/status").
	Permission string
	// Essential: sparecap cannot keep its contract without it (an attach
	// missing one is refused). Otherwise it is a courtesy: notices still
	// go out, and Effect says what the tenant loses.
	Essential bool
	Effect    string
	// Since is when it was first found missing; Detail, for a refused
	// call, is what the API answered.
	Since  time.Time
	Detail string
}

// Has reports whether permission is among the missing ones.
func (a Access) Has(permission string) bool {
	for _, m := range a.Missing {
		if m.Permission == permission {
			return true
		}
	}
	return false
}

// Merge returns a after what a driver learned at now, and the permissions
// that are newly missing. checked: missing is the whole answer of a
// permission check and replaces what a had (a permission missing before
// keeps its Since). Otherwise missing were refused by calls since and are
// added to what a had.
func (a Access) Merge(checked bool, missing []MissingPermission, now time.Time) (Access, []MissingPermission) {
	next := Access{CheckedAt: a.CheckedAt}
	if checked {
		next.CheckedAt = now
	} else {
		next.Missing = append(next.Missing, a.Missing...)
	}
	var added []MissingPermission
	for _, m := range missing {
		if next.Has(m.Permission) {
			continue
		}
		if m.Since.IsZero() {
			m.Since = now
		}
		if old, ok := a.find(m.Permission); ok {
			m.Since = old.Since
		} else {
			added = append(added, m)
		}
		next.Missing = append(next.Missing, m)
	}
	return next, added
}

func (a Access) find(permission string) (MissingPermission, bool) {
	for _, m := range a.Missing {
		if m.Permission == permission {
			return m, true
		}
	}
	return MissingPermission{}, false
}

// AccessMessage is the text of a PermissionMissing event about missing:
// each permission and what it costs.
func AccessMessage(missing []MissingPermission) string {
	parts := make([]string, len(missing))
	for i, m := range missing {
		kind := "courtesy"
		if m.Essential {
			kind = "essential"
		}
		parts[i] = fmt.Sprintf("%s (%s): %s", m.Permission, kind, m.Effect)
	}
	return "the cluster's API does not grant sparecap " + strings.Join(parts, "; ")
}
