package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// accessJSON is how a cluster's domain.Access is kept in its access
// column: small, read with every cluster, written only by SetAccess.
type accessJSON struct {
	CheckedAt time.Time     `json:"checked_at,omitzero"`
	Missing   []missingJSON `json:"missing,omitempty"`
}

type missingJSON struct {
	Permission string    `json:"permission"`
	Essential  bool      `json:"essential,omitempty"`
	Effect     string    `json:"effect,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	Detail     string    `json:"detail,omitempty"`
}

// encodeAccess returns the column text of a: ” for the zero Access.
// Times are kept as the other columns keep them (UTC, microseconds).
func encodeAccess(a domain.Access) (string, error) {
	if a.CheckedAt.IsZero() && len(a.Missing) == 0 {
		return "", nil
	}
	j := accessJSON{CheckedAt: readBack(a.CheckedAt)}
	for _, m := range a.Missing {
		j.Missing = append(j.Missing, missingJSON{Permission: m.Permission, Essential: m.Essential, Effect: m.Effect,
			Since: readBack(m.Since), Detail: text(m.Detail)}) // the cluster API wrote it
	}
	b, err := json.Marshal(j)
	return string(b), err
}

// accessCol scans the access column.
type accessCol struct{ a *domain.Access }

func (c accessCol) Scan(v any) error {
	text, err := columnText(v, "access")
	if err != nil {
		return err
	}
	*c.a = domain.Access{}
	if len(text) == 0 {
		return nil
	}
	var j accessJSON
	if err := json.Unmarshal(text, &j); err != nil {
		return fmt.Errorf("scan access: %w", err)
	}
	c.a.CheckedAt = j.CheckedAt
	for _, m := range j.Missing {
		c.a.Missing = append(c.a.Missing, domain.MissingPermission{Permission: m.Permission, Essential: m.Essential,
			Effect: m.Effect, Since: m.Since, Detail: m.Detail})
	}
	return nil
}

// listCol scans a comma-separated list (empty: none).
type listCol struct{ l *[]string }

func (c listCol) Scan(v any) error {
	text, err := columnText(v, "list")
	if err != nil {
		return err
	}
	*c.l = nil
	if len(text) > 0 {
		*c.l = strings.Split(string(text), ",")
	}
	return nil
}
