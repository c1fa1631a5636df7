package apiv1

import "time"

// CreateBudgetRequest is the body of POST /v1/budgets.
type CreateBudgetRequest struct {
	// Name is unique in the project.
	Name string `json:"name" api:"required"`
	// Amount is the monthly budget in dollars ("5000", "1250.50").
	Amount string `json:"amount" api:"required"`
	// Label, "key=value", budgets the work with that label (cost
	// allocation's share of the nodes it ran on); empty: the project.
	Label string `json:"label,omitempty"`
	// Thresholds are the percentages of Amount that raise an alert once
	// spent (default 50, 80 and 100); the forecast reaching 100% raises
	// one too.
	Thresholds []int `json:"thresholds,omitempty"`
	// ChangePercent, above 0, raises an alert when a day's spend is more
	// than this percentage above the mean of the seven days before.
	ChangePercent int `json:"change_percent,omitempty"`
}

// Budget is a budget and its month so far.
type Budget struct {
	ID            string    `json:"id"`
	ProjectID     string    `json:"project_id"`
	Name          string    `json:"name"`
	Label         string    `json:"label,omitempty"`
	Amount        string    `json:"amount"`
	Thresholds    []int     `json:"thresholds"`
	ChangePercent int       `json:"change_percent,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// Month is the month the status is of ("2026-11"); Spend and Forecast
	// are dollars to the cent; ForecastLow and ForecastHigh bound the
	// forecast at 95% once the month has three complete days.
	Month        string  `json:"month"`
	Spend        string  `json:"spend"`
	Forecast     string  `json:"forecast"`
	ForecastLow  string  `json:"forecast_low,omitempty"`
	ForecastHigh string  `json:"forecast_high,omitempty"`
	SpentPercent float64 `json:"spent_percent"`
	// Note says when there is too little history to trust the forecast.
	Note string `json:"note,omitempty"`
}

// BudgetList is the body of GET /v1/budgets.
type BudgetList struct {
	Budgets []Budget `json:"budgets"`
}

// BudgetAlert is an alert a budget raised.
type BudgetAlert struct {
	Seq       int64     `json:"seq"`
	BudgetID  string    `json:"budget_id"`
	ProjectID string    `json:"project_id"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Threshold int       `json:"threshold"`
	Month     string    `json:"month"`
	At        time.Time `json:"at"`
	Spend     string    `json:"spend"`
	Forecast  string    `json:"forecast"`
	Message   string    `json:"message"`
}

// BudgetAlerts is the body of GET /v1/budgets/alerts.
type BudgetAlerts struct {
	Alerts []BudgetAlert `json:"alerts"`
	// NextCursor, when set, is the cursor of the next page (a full page
	// was returned; the next may be empty).
	NextCursor string `json:"next_cursor,omitempty"`
}

// Lending is the body of GET /v1/admin/lending: what the fleet lent and
// earned over a period, by pool.
type Lending struct {
	Currency string        `json:"currency"`
	From     time.Time     `json:"from"`
	To       time.Time     `json:"to"`
	Pools    []LendingPool `json:"pools"`
	Totals   LendingPool   `json:"totals"`
}

// LendingPool is one region and GPU type's period. GPU-hours lent are
// preemptible usage, out of idle machines (no reservation) or out of
// reserved ones their holders did not use; revenue is what tenants were
// billed (USD, to the cent), preemptible and standard. Reclaims are the
// drains sparecap started to take capacity back (preempted, fair share,
// out of service); lost work what they put at risk (the ledger), valued
// at the price the work was paid.
type LendingPool struct {
	Region               string  `json:"region,omitempty"`
	GPUType              string  `json:"gpu_type,omitempty"`
	LentIdleGPUHours     float64 `json:"lent_idle_gpu_hours"`
	LentReservedGPUHours float64 `json:"lent_reserved_gpu_hours"`
	StandardGPUHours     float64 `json:"standard_gpu_hours"`
	PreemptibleRevenue   string  `json:"preemptible_revenue"`
	StandardRevenue      string  `json:"standard_revenue"`
	Revenue              string  `json:"revenue"`
	Reclaims             int     `json:"reclaims"`
	LostGPUHours         float64 `json:"lost_gpu_hours"`
	LostValue            string  `json:"lost_value"`
}
