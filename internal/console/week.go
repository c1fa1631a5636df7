package console

import (
	"math"
	"net/http"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// weekPage is a pool's hours of the week as a heatmap: a row a day, a
// cell an hour, shaded by its rate against the pool's highest.
type weekPage struct {
	W    *apiv1.WeekStats
	Days [7][24]weekCell
	// F is the pool's capacity forecast for the same hours.
	F *apiv1.PoolForecast
}

type weekCell struct {
	apiv1.WeekHour
	// Level shades the cell, 0 (lowest rate) to 4 (highest); -1 without
	// enough service.
	Level  int
	Per100 float64
}

// week shows when the pool ?region= ?gpu_type= is reclaimed, by hour of
// the week, over the last four weeks, the next day's hours, and the GPUs
// it is forecast to lend in them.
func (c *Console) week(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	q := r.URL.Query()
	ws, err := api.PreemptionWeek(r.Context(), q.Get("region"), q.Get("gpu_type"), time.Time{}, time.Time{}, 24)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	f, err := api.CapacityForecast(r.Context(), ws.Region, ws.GPUType, 24)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	p := heatmap(ws)
	if len(f.Pools) == 1 {
		p.F = &f.Pools[0]
	}
	c.render(w, http.StatusOK, "week", view{Title: "Pool " + ws.Region + " " + ws.GPUType, Nav: "clusters", Data: p}, s)
}

// heatmap lays the hours of the week out by day and shades them.
func heatmap(ws *apiv1.WeekStats) weekPage {
	top := 0.0
	for _, h := range ws.Hours {
		if h.Enough {
			top = math.Max(top, h.Rate)
		}
	}
	p := weekPage{W: ws}
	for _, h := range ws.Hours {
		cell := weekCell{WeekHour: h, Level: -1, Per100: 100 * h.Rate}
		if h.Enough {
			cell.Level = 0
			if top > 0 {
				cell.Level = min(int(h.Rate/top*4+0.5), 4)
			}
		}
		p.Days[h.HourOfWeek/24][h.HourOfWeek%24] = cell
	}
	return p
}
