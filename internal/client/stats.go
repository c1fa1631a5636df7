package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// PreemptionStats returns interruption statistics of preemptible nodes per
// region and GPU type over the window [from, to). A zero from or to is left
// to the server (to: now; from: 7 days before to); empty region and gpuType
// do not filter. Any token may call it.
func (c *Client) PreemptionStats(ctx context.Context, from, to time.Time, region, gpuType string) (*apiv1.PreemptionStatsList, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339Nano))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339Nano))
	}
	if region != "" {
		q.Set("region", region)
	}
	if gpuType != "" {
		q.Set("gpu_type", gpuType)
	}
	return call[apiv1.PreemptionStatsList](ctx, c, http.MethodGet, "/v1/stats/preemptions", q, nil)
}

// PreemptionWeek returns the interruption history of the pool of region
// and gpuType by hour of the week over [from, to) (zero: the server's
// defaults, the four weeks up to now) and a forecast of the ahead hours
// after it.
func (c *Client) PreemptionWeek(ctx context.Context, region, gpuType string, from, to time.Time, ahead int) (*apiv1.WeekStats, error) {
	q := url.Values{"region": {region}, "gpu_type": {gpuType}, "ahead": {strconv.Itoa(ahead)}}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339Nano))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339Nano))
	}
	return call[apiv1.WeekStats](ctx, c, http.MethodGet, "/v1/stats/preemptions/week", q, nil)
}

// CapacityForecast is GET /v1/capacity/forecast: the lendable GPUs of
// the pools region and gpuType select (empty: all) over the next hours.
func (c *Client) CapacityForecast(ctx context.Context, region, gpuType string, hours int) (*apiv1.CapacityForecast, error) {
	q := url.Values{"hours": {strconv.Itoa(hours)}}
	if region != "" {
		q.Set("region", region)
	}
	if gpuType != "" {
		q.Set("gpu_type", gpuType)
	}
	return call[apiv1.CapacityForecast](ctx, c, http.MethodGet, "/v1/capacity/forecast", q, nil)
}
