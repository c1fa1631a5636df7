package console

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

type fleetRow struct {
	Region, GPUType, Pool, State string
	Machines, GPUs               int
}

type fleetPage struct {
	Rows         []fleetRow
	Reservations []apiv1.Reservation
	Stats        []apiv1.PreemptionStats
}

func (c *Console) fleet(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !s.admin {
		c.render(w, http.StatusForbidden, "error", view{Title: "Admins only", Error: "The fleet page needs the admin token."}, s)
		return
	}
	ctx := r.Context()
	ms, err := api.ListMachines(ctx, client.ListMachinesOptions{})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	rs, err := api.ListReservations(ctx)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	st, err := api.PreemptionStats(ctx, time.Time{}, time.Time{}, "", "")
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	counts := map[fleetRow]fleetRow{}
	for _, m := range ms.Machines {
		k := fleetRow{Region: m.Region, GPUType: m.GPUType, Pool: m.Pool, State: m.State}
		v := counts[k]
		v.Region, v.GPUType, v.Pool, v.State = k.Region, k.GPUType, k.Pool, k.State
		v.Machines++
		v.GPUs += m.GPUs
		counts[k] = v
	}
	rows := make([]fleetRow, 0, len(counts))
	for _, v := range counts {
		rows = append(rows, v)
	}
	slices.SortFunc(rows, func(a, b fleetRow) int {
		return strings.Compare(a.Region+a.GPUType+a.Pool+a.State, b.Region+b.GPUType+b.Pool+b.State)
	})
	c.render(w, http.StatusOK, "fleet", view{Title: "Fleet", Nav: "fleet", Data: fleetPage{Rows: rows, Reservations: rs.Reservations, Stats: st.Stats}}, s)
}
