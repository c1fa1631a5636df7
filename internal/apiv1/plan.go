package apiv1

// Plan is GET /v1/plan: what a job would cost and take on preemptible and
// on standard nodes in a region and GPU type, at the preemption rate
// measured there (or the rate asked), and with a deadline the plan that
// meets it. See docs/planning.md.
type Plan struct {
	Region  string `json:"region"`
	GPUType string `json:"gpu_type"`
	// The job, as asked.
	GPUHours           float64 `json:"gpu_hours"`
	GPUs               int     `json:"gpus"`
	CheckpointSeconds  float64 `json:"checkpoint_seconds"`
	RestartSeconds     float64 `json:"restart_seconds"`
	CheckpointAtNotice bool    `json:"checkpoint_at_notice"`
	DeadlineHours      float64 `json:"deadline_hours,omitempty"`
	// The market: the node preemption rate (RateBasis "measured",
	// "upper_bound" with none seen, "asked" when given), the prices and
	// the notice.
	PreemptionRatePercentPerHour float64 `json:"preemption_rate_percent_per_hour"`
	RateBasis                    string  `json:"rate_basis"`
	OnDemandPerGPUHour           string  `json:"on_demand_per_gpu_hour"`
	PreemptibleDiscountPercent   string  `json:"preemptible_discount_percent"`
	DrainWindowSeconds           float64 `json:"drain_window_seconds"`
	// The expectation by formula.
	IntervalSeconds float64 `json:"interval_seconds"`
	// IntervalBasis: "daly", "asked", or "deadline" (the cheapest that
	// meets the deadline, of Daly's and shorter ones); absent when no
	// interval is needed. DalyIntervalSeconds is Daly's, for comparison.
	IntervalBasis       string  `json:"interval_basis,omitempty"`
	DalyIntervalSeconds float64 `json:"daly_interval_seconds,omitempty"`
	JobMTBFSeconds      float64 `json:"job_mtbf_seconds"`
	OverheadPercent     float64 `json:"overhead_percent"`
	ExpectedHours       float64 `json:"expected_hours"`
	ExpectedCost        float64 `json:"expected_cost"`
	StandardHours       float64 `json:"standard_hours"`
	StandardCost        float64 `json:"standard_cost"`
	// BreakEvenRatePercentPerHour is the rate at which preemptible costs
	// what standard does; absent when no rate up to 1000 %/h does.
	BreakEvenRatePercentPerHour *float64 `json:"break_even_rate_percent_per_hour,omitempty"`
	// PreemptibleAlwaysPays: the break-even rate is past any pool's (100
	// %/h, a node lasting an hour on average) and the rate planned with,
	// or there is none.
	PreemptibleAlwaysPays bool `json:"preemptible_always_pays"`
	// Runs of the Monte Carlo, and the job on preemptible nodes only.
	Runs        int         `json:"runs"`
	Preemptible PlanOutcome `json:"preemptible"`
	// With a deadline: the plan, the greedy baseline and standard only.
	Deadline *PlanDeadline `json:"deadline,omitempty"`
	Advice   string        `json:"advice"`
	Note     string        `json:"note,omitempty"`
}

// PlanOutcome is a strategy's Monte Carlo result: the share of runs that
// met the deadline and that moved to standard nodes, the expected cost
// and hours and the hours' percentiles (-1: a run that did not finish).
type PlanOutcome struct {
	Strategy        string  `json:"strategy"`
	MeetProbability float64 `json:"meet_probability"`
	ExpectedCost    float64 `json:"expected_cost"`
	ExpectedHours   float64 `json:"expected_hours"`
	P10Hours        float64 `json:"p10_hours"`
	P50Hours        float64 `json:"p50_hours"`
	P90Hours        float64 `json:"p90_hours"`
	MovedShare      float64 `json:"moved_share"`
	UnfinishedShare float64 `json:"unfinished_share"`
}

// PlanDeadline compares the plan with its baselines.
type PlanDeadline struct {
	Hours         float64     `json:"deadline_hours"`
	Plan          PlanOutcome `json:"plan"`
	Greedy        PlanOutcome `json:"greedy"`
	StandardHours float64     `json:"standard_hours"`
	StandardCost  float64     `json:"standard_cost"`
	StandardMeets bool        `json:"standard_meets"`
}

// PlanOptions is the body of GET /v1/plan/options: a job's plan in every
// pool (region and GPU type) it may run in, best first.
type PlanOptions struct {
	GPUHours      float64 `json:"gpu_hours"`
	GPUs          int     `json:"gpus"`
	DeadlineHours float64 `json:"deadline_hours,omitempty"`
	// Options, best first: pools with the lendable GPUs the job needs
	// before those without; then, with a deadline, those that meet it in
	// 99% of runs by expected cost, then the rest by their chance; without
	// one, by expected cost, then expected time.
	Options []PlanOption `json:"options"`
	Note    string       `json:"note,omitempty"`
}

// PlanOption is the job in one pool.
type PlanOption struct {
	Rank                         int     `json:"rank"`
	Region                       string  `json:"region"`
	GPUType                      string  `json:"gpu_type"`
	OnDemandPerGPUHour           string  `json:"on_demand_per_gpu_hour"`
	PreemptionRatePercentPerHour float64 `json:"preemption_rate_percent_per_hour"`
	// ExpectedCost and ExpectedHours: on preemptible nodes, or with a
	// deadline the plan that moves to standard ones when the slack runs
	// out; P90Hours its 90th percentile.
	ExpectedCost  float64 `json:"expected_cost"`
	ExpectedHours float64 `json:"expected_hours"`
	P90Hours      float64 `json:"p90_hours"`
	// MeetProbability, with a deadline: the share of runs that meet it.
	MeetProbability *float64 `json:"meet_probability,omitempty"`
	// LendableGPUs the pool is forecast to have in the next hour, from
	// ForecastSamples past hours (0: nothing known); Fits when they cover
	// the job's GPUs, or nothing is known.
	LendableGPUs    float64 `json:"lendable_gpus_next_hour"`
	ForecastSamples int     `json:"forecast_samples"`
	Fits            bool    `json:"fits"`
	// Plan is the whole plan in the pool (GET /v1/plan's answer).
	Plan Plan `json:"plan"`
}
