package apiv1

import "time"

// PreemptionStats are the interruption statistics of preemptible nodes in
// one region and GPU type over a window. See package internal/stats for the
// precise definitions; docs/api.md summarises them.
type PreemptionStats struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
	// NodesObserved counts the preemptible nodes that contribute to any of
	// the other fields.
	NodesObserved int `json:"nodes_observed"`
	// PreemptibleNodeHours: hours preemptible nodes served (from ready to
	// the start of their drain or their removal) inside the window.
	PreemptibleNodeHours float64 `json:"preemptible_node_hours"`
	// Preemptions: preemptible nodes whose drain started in the window for
	// a cause the tenant did not ask for (preempted, fair_share,
	// out_of_service).
	Preemptions int `json:"preemptions"`
	// PreemptionsPerNodeHour is Preemptions / PreemptibleNodeHours, or 0
	// when there are no node-hours.
	PreemptionsPerNodeHour float64 `json:"preemptions_per_node_hour"`
	// MedianLifetimeSeconds and P90LifetimeSeconds: nearest-rank
	// percentiles of ready → drain start of the preempted nodes counted in
	// Preemptions; 0 when Preemptions is 0.
	MedianLifetimeSeconds float64 `json:"median_lifetime_seconds"`
	P90LifetimeSeconds    float64 `json:"p90_lifetime_seconds"`
	// DrainsEndedEarly and DrainsEndedAtDeadline count the drains of
	// preempted nodes (same causes as Preemptions) that finished in the
	// window, by outcome.
	DrainsEndedEarly      int `json:"drains_ended_early"`
	DrainsEndedAtDeadline int `json:"drains_ended_at_deadline"`
	// EarlyShare is DrainsEndedEarly over both drain counts, or 0 when no
	// drain finished.
	EarlyShare float64 `json:"early_share"`
}

// PreemptionStatsList is the body of GET /v1/stats/preemptions. Stats has
// one entry per region and GPU type of the fleet (after the filters),
// sorted by region then GPU type. The window is [From, To).
type PreemptionStatsList struct {
	From  time.Time         `json:"from"`
	To    time.Time         `json:"to"`
	Stats []PreemptionStats `json:"stats"`
}

// CheckpointAdvice is the body of GET /v1/advice/checkpoint: the
// checkpoint interval for a job in a region and GPU type, from the
// preemption rate measured there (GET /v1/stats/preemptions' figures over
// the same window).
type CheckpointAdvice struct {
	Region            string    `json:"region"`
	GPUType           string    `json:"gpu_type"`
	CheckpointSeconds float64   `json:"checkpoint_seconds"`
	From              time.Time `json:"from"`
	To                time.Time `json:"to"`
	// Preemptions and PreemptibleNodeHours are the measurement.
	Preemptions          int     `json:"preemptions"`
	PreemptibleNodeHours float64 `json:"preemptible_node_hours"`
	// PreemptionRatePercentPerHour is the rate used: Preemptions over
	// the node-hours (in percent of nodes an hour), or, with no
	// preemption seen, at most one in the node-hours observed
	// (RateBasis "upper_bound"); 0 with no node-hours ("none").
	PreemptionRatePercentPerHour float64 `json:"preemption_rate_percent_per_hour"`
	RateBasis                    string  `json:"rate_basis"`
	// MTBFSeconds is the mean time between preemptions of one node.
	MTBFSeconds float64 `json:"mtbf_seconds"`
	// Formula names how the interval was worked out: "daly" (Daly's
	// refinement of Young's √(2δM)); YoungIntervalSeconds is Young's.
	Formula                    string  `json:"formula"`
	RecommendedIntervalSeconds float64 `json:"recommended_interval_seconds"`
	YoungIntervalSeconds       float64 `json:"young_interval_seconds"`
	// ExpectedOverheadPercent is the share of time spent checkpointing
	// and redoing work lost to preemptions; ExpectedLostSecondsPerPreemption
	// the work a preemption loses when no checkpoint is taken on its notice
	// (with one that completes before the deadline: none).
	ExpectedOverheadPercent          float64 `json:"expected_overhead_percent"`
	ExpectedLostSecondsPerPreemption float64 `json:"expected_lost_seconds_per_preemption"`
	Note                             string  `json:"note,omitempty"`
}

// WeekStats is the body of GET /v1/stats/preemptions/week: one pool's
// interruption history by hour of the week (UTC) over a window, and a
// forecast of the next hours from it. See package internal/stats.
type WeekStats struct {
	Region  string    `json:"region"`
	GPUType string    `json:"gpu_type"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	// EnoughHistory is false while the window holds less than two weeks
	// of service, or every hour of the week fewer than MinNodeHours:
	// Note then says why, and the rates are not yet a pattern.
	EnoughHistory bool   `json:"enough_history"`
	Note          string `json:"note,omitempty"`
	// Hours are the 168 hours of the week, Monday 00:00 UTC first.
	Hours []WeekHour `json:"hours"`
	// Forecast is the next hours from the window's end, each the history
	// of its hour of the week.
	Forecast []ForecastHour `json:"forecast"`
}

// WeekHour is one hour of the week over the window.
type WeekHour struct {
	// HourOfWeek is 0 for Monday 00:00-01:00 UTC, 167 for Sunday 23:00.
	HourOfWeek int    `json:"hour_of_week"`
	Day        string `json:"day"`
	Hour       int    `json:"hour"`
	// NodeHours preemptible nodes served in this hour of the week, over
	// the window; Preemptions started in it.
	NodeHours   float64 `json:"node_hours"`
	Preemptions int     `json:"preemptions"`
	// Rate is Preemptions / NodeHours (0 without node-hours); RateLow and
	// RateHigh its 95% confidence interval (a Poisson count over the
	// node-hours; RateHigh is 0 without node-hours, where nothing is known).
	Rate     float64 `json:"preemptions_per_node_hour"`
	RateLow  float64 `json:"rate_low"`
	RateHigh float64 `json:"rate_high"`
	// MeanNodes is how many preemptible nodes served on average during
	// this hour of the week: NodeHours over the times the window holds it.
	MeanNodes float64 `json:"mean_preemptible_nodes"`
	// Enough: at least MinNodeHours of service in this hour of the week.
	Enough bool `json:"enough"`
}

// ForecastHour is one coming hour, from the history of its hour of the
// week.
type ForecastHour struct {
	Start time.Time `json:"start"`
	WeekHour
}

// LostWork is the body of GET /v1/stats/lost-work: the work drains put at
// risk at their notices in [From, To), grouped by GroupBy, next to what
// preemptible capacity saved the same project in that period.
type LostWork struct {
	From    time.Time      `json:"from"`
	To      time.Time      `json:"to"`
	GroupBy string         `json:"group_by"`
	Lines   []LostWorkLine `json:"lines"`
	Totals  LostWorkTotals `json:"totals"`
}

// LostWorkLine is one group: a drain (group_by reclaim, with its node,
// cause and notice), a job (the gang of the work; a node's own work is
// "node/<name>"), a cluster or a month.
type LostWorkLine struct {
	Key         string     `json:"key"`
	ClusterID   string     `json:"cluster_id,omitempty"`
	ClusterName string     `json:"cluster_name,omitempty"`
	NodeName    string     `json:"node_name,omitempty"`
	Job         string     `json:"job,omitempty"`
	Cause       string     `json:"cause,omitempty"`
	NoticedAt   *time.Time `json:"noticed_at,omitempty"`
	// Drains counts the drains in the group.
	Drains int `json:"drains"`
	// LostGPUSeconds at risk at the notices (since the last checkpoints),
	// LostGPUHours the same in hours, LostAmount its value at the price
	// the work was paid at then (USD, 6 decimals).
	LostGPUSeconds int64   `json:"lost_gpu_seconds"`
	LostGPUHours   float64 `json:"lost_gpu_hours"`
	LostAmount     string  `json:"lost_amount"`
	// SavedGPUSeconds is the part of LostGPUSeconds whose work reported a
	// checkpoint after its notice, before it went: saved, not destroyed.
	// DestroyedGPUHours is the rest, in hours.
	SavedGPUSeconds   int64   `json:"saved_gpu_seconds"`
	DestroyedGPUHours float64 `json:"destroyed_gpu_hours"`
}

// LostWorkTotals sums the lines, with what preemptible capacity saved the
// same scope over the period (its usage's on-demand equivalent less its
// amount, USD, 2 decimals).
type LostWorkTotals struct {
	Drains             int     `json:"drains"`
	LostGPUSeconds     int64   `json:"lost_gpu_seconds"`
	LostGPUHours       float64 `json:"lost_gpu_hours"`
	LostAmount         string  `json:"lost_amount"`
	SavedGPUSeconds    int64   `json:"saved_gpu_seconds"`
	DestroyedGPUHours  float64 `json:"destroyed_gpu_hours"`
	PreemptibleSavings string  `json:"preemptible_savings"`
}

// CapacityForecast is the body of GET /v1/capacity/forecast: per pool,
// the GPUs preemptible tenants can expect hour by hour. See package
// internal/forecast.
type CapacityForecast struct {
	// At is when it was made; the first hour starts at the next hour.
	At    time.Time      `json:"at"`
	Pools []PoolForecast `json:"pools"`
}

// PoolForecast is one pool's forecast.
type PoolForecast struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
	// CapacityGPUs are the pool's GPUs in service now.
	CapacityGPUs int `json:"capacity_gpus"`
	// EnoughHistory is false while an hour has fewer samples than a 90%
	// interval needs (four weeks of the pool's history); Note says so.
	EnoughHistory bool           `json:"enough_history"`
	Note          string         `json:"note,omitempty"`
	Hours         []ForecastGPUs `json:"hours"`
}

// ForecastGPUs is one hour of a pool's forecast: the lendable GPUs (in
// service, not held by standard nodes; preemptible tenants share them by
// fair share) expected, and a 90% interval, from Samples past hours
// (the same hour of the week, and two either side, in each of the last
// four weeks).
type ForecastGPUs struct {
	Start        time.Time `json:"start"`
	ExpectedGPUs float64   `json:"expected_gpus"`
	LowGPUs      float64   `json:"low_gpus"`
	HighGPUs     float64   `json:"high_gpus"`
	Samples      int       `json:"samples"`
	// BookedGPUs are certain: what bookings (clusters booked ahead) and
	// machines booked for maintenance hold in the hour, which the past
	// does not know of; they are taken off the figures above.
	BookedGPUs int `json:"booked_gpus,omitempty"`
}
