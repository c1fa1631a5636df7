package console

import (
	"net/http"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

type lendingPage struct {
	L     *apiv1.Lending
	Month string
}

// lending shows the operator a month's lending, revenue, reclaims and
// lost work per pool (?month=2026-11; default this month).
func (c *Console) lending(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !s.admin {
		c.render(w, http.StatusForbidden, "error", view{Title: "Forbidden", Error: "The lending page is the operator's."}, s)
		return
	}
	now := c.clock.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if m := r.URL.Query().Get("month"); m != "" {
		t, err := time.Parse("2006-01", m)
		if err != nil {
			c.render(w, http.StatusBadRequest, "error", view{Title: "Bad month", Error: "Give a month like 2026-11."}, s)
			return
		}
		from = t
	}
	l, err := api.Lending(r.Context(), from, from.AddDate(0, 1, 0))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.render(w, http.StatusOK, "lending", view{Title: "Lending and revenue", Nav: "fleet", Data: lendingPage{L: l, Month: from.Format("2006-01")}}, s)
}
