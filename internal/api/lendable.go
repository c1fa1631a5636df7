package api

import (
	"context"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/forecast"
	"github.com/sparecap/sparecap/internal/store"
)

// lendableCache keeps every pool's lendable GPUs hour by hour for one
// hour. A forecast reads whole hours past, which do not change within
// the hour, so the node history (the costly read: seconds at 100,000
// GPUs) is read once an hour, whoever asks and however often; forecasts
// wait for that read one at a time.
type lendableCache struct {
	mu   sync.Mutex
	hour time.Time
	hist map[[2]string][]float64
}

// of is every pool of machines' lendable GPUs in the hours from
// historyStart(now) to now's hour, read again once the hour has turned
// or a pool is new.
func (c *lendableCache) of(ctx context.Context, st store.Store, machines []domain.Machine, now time.Time) (map[[2]string][]float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hour := now.Truncate(time.Hour)
	pools := mustPools(machines)
	if c.hist != nil && c.hour.Equal(hour) && hasAll(c.hist, pools) {
		return c.hist, nil
	}
	from := historyStart(now)
	nodes, err := st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true, Class: domain.Standard, RemovedSince: from})
	if err != nil {
		return nil, err
	}
	hist := make(map[[2]string][]float64, len(pools))
	for _, p := range pools {
		hist[p] = forecast.Lendable(nodes, machines, p[0], p[1], from, hour)
	}
	c.hour, c.hist = hour, hist
	return hist, nil
}

func hasAll(hist map[[2]string][]float64, pools [][2]string) bool {
	for _, p := range pools {
		if _, ok := hist[p]; !ok {
			return false
		}
	}
	return true
}
