package apiv1

import "time"

// Amounts are decimal strings in Currency. Line amounts are rounded half to
// even to 6 decimals; totals are exact sums rounded to cents (the exact sum
// is given too), so rounding never accumulates.

// UsageLine is priced usage: one node over a stretch of constant prices, or
// a group of those (group_by=cluster or compute_class), in which case the
// fields that differ inside the group are empty.
type UsageLine struct {
	ProjectID              string    `json:"project_id,omitempty"`
	ClusterID              string    `json:"cluster_id,omitempty"`
	ClusterName            string    `json:"cluster_name,omitempty"`
	NodeID                 string    `json:"node_id,omitempty"`
	NodeName               string    `json:"node_name,omitempty"`
	ComputeClass           string    `json:"compute_class,omitempty"`
	Region                 string    `json:"region,omitempty"`
	GPUType                string    `json:"gpu_type,omitempty"`
	GPUs                   int       `json:"gpus,omitempty"`
	Start                  time.Time `json:"start"`
	End                    time.Time `json:"end"`
	BilledSeconds          int64     `json:"billed_seconds"`
	GPUSeconds             int64     `json:"gpu_seconds"`
	RatePerGPUHour         string    `json:"rate_per_gpu_hour,omitempty"`
	OnDemandRatePerGPUHour string    `json:"on_demand_rate_per_gpu_hour,omitempty"`
	Amount                 string    `json:"amount"`
	OnDemandAmount         string    `json:"on_demand_amount"`
	// Priced is false when the price book had no price for this usage.
	Priced bool `json:"priced"`
	// Group is the line's value of a group_by that splits nodes among
	// their work (namespace, job, account, work, label:<key>): empty for
	// work without one (no such label), and for the idle rest (Idle).
	Group string `json:"group,omitempty"`
	// Idle: the GPU-seconds of the lines' nodes that no work held.
	Idle bool `json:"idle,omitempty"`
	// Units is the most units of work (epochs, steps) the group's work
	// reported completed (sparecap.dev/progress); CostPerUnit is Amount
	// over Units (6 decimals): work redone after a reclaim is in the
	// amount, not in the units. Left out when the work reports none.
	Units       int64  `json:"units,omitempty"`
	CostPerUnit string `json:"cost_per_unit,omitempty"`
}

// UsageTotals add up a period's usage.
type UsageTotals struct {
	GPUSeconds int64 `json:"gpu_seconds"`
	// Amount is rounded to cents; AmountExact has every decimal (or 12
	// and "…" when the expansion does not end).
	Amount             string `json:"amount"`
	AmountExact        string `json:"amount_exact"`
	OnDemandEquivalent string `json:"on_demand_equivalent"`
	Savings            string `json:"savings"`
	UnpricedGPUSeconds int64  `json:"unpriced_gpu_seconds"`
}

// Usage is the body of GET /v1/usage.
type Usage struct {
	Currency  string                 `json:"currency"`
	From      time.Time              `json:"from"`
	To        time.Time              `json:"to"`
	GroupBy   string                 `json:"group_by"`
	LineItems []UsageLine            `json:"line_items"`
	Totals    UsageTotals            `json:"totals"`
	ByClass   map[string]UsageTotals `json:"totals_by_compute_class"`
	// Rounding states the rounding rules of the amounts.
	Rounding string `json:"rounding"`
}

// Invoice is the body of GET /v1/invoices: a project's usage over a
// period, by cluster and compute class.
type Invoice struct {
	ProjectID           string                 `json:"project_id"`
	Currency            string                 `json:"currency"`
	From                time.Time              `json:"from"`
	To                  time.Time              `json:"to"`
	Lines               []UsageLine            `json:"lines"`
	ByClass             map[string]UsageTotals `json:"subtotals_by_compute_class"`
	Total               UsageTotals            `json:"total"`
	PreemptibleDiscount string                 `json:"preemptible_discount_percent"`
	GeneratedAt         time.Time              `json:"generated_at"`
}

// PriceEntry is an entry of the price book.
type PriceEntry struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	Region        string    `json:"region,omitempty"`
	GPUType       string    `json:"gpu_type,omitempty"`
	ReservationID string    `json:"reservation_id,omitempty"`
	Value         string    `json:"value"`
	EffectiveFrom time.Time `json:"effective_from"`
	CreatedAt     time.Time `json:"created_at"`
}

// CreatePriceRequest is the body of POST /v1/admin/prices. EffectiveFrom
// defaults to now and may not be in the past: past usage is never
// repriced.
type CreatePriceRequest struct {
	Kind          string     `json:"kind" api:"required"`
	Region        string     `json:"region,omitempty"`
	GPUType       string     `json:"gpu_type,omitempty"`
	ReservationID string     `json:"reservation_id,omitempty"`
	Value         string     `json:"value" api:"required"`
	EffectiveFrom *time.Time `json:"effective_from,omitempty"`
}

// PriceBook is the body of GET /v1/admin/prices.
type PriceBook struct {
	Prices []PriceEntry `json:"prices"`
}

// Rate is what one region and GPU type costs per GPU-hour now.
type Rate struct {
	Region      string `json:"region"`
	GPUType     string `json:"gpu_type"`
	OnDemand    string `json:"on_demand_per_gpu_hour,omitempty"`
	Preemptible string `json:"preemptible_per_gpu_hour,omitempty"`
}

// Rates is the body of GET /v1/prices.
type Rates struct {
	Currency                   string `json:"currency"`
	PreemptibleDiscountPercent string `json:"preemptible_discount_percent"`
	Rates                      []Rate `json:"rates"`
}
