package console

import (
	"net/http"

	"github.com/sparecap/sparecap/internal/client"
)

// storage shows what each project's input makes the server keep against
// its quota: the operator every project, a project its own.
func (c *Console) storage(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	st, err := api.Storage(r.Context(), "")
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	nav := "usage"
	if s.admin {
		nav = "fleet"
	}
	c.render(w, http.StatusOK, "storage", view{Title: "Storage", Nav: nav, Data: st}, s)
}
