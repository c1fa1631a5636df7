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
	JobMTBFSeconds  float64 `json:"job_mtbf_seconds"`
	OverheadPercent float64 `json:"overhead_percent"`
	ExpectedHours   float64 `json:"expected_hours"`
	ExpectedCost    float64 `json:"expected_cost"`
	StandardHours   float64 `json:"standard_hours"`
	StandardCost    float64 `json:"standard_cost"`
	// BreakEvenRatePercentPerHour is the rate at which preemptible costs
	// what standard does; absent when no rate up to 1000 %/h does.
	BreakEvenRatePercentPerHour *float64 `json:"break_even_rate_percent_per_hour,omitempty"`
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
