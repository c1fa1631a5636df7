package domain

import "time"

// Budget is a project's monthly spending limit: on the whole project, or
// on the work of one label value (Label "team=vision"), whose share of
// the nodes' cost cost allocation gives.
type Budget struct {
	ID        string
	ProjectID string
	Name      string
	// Label is "key=value", empty for the whole project.
	Label string
	// Amount is the monthly budget in dollars, at most 6 decimals.
	Amount string
	// Thresholds are the percentages of Amount whose crossing raises an
	// alert (by spend so far; 100 also by forecast).
	Thresholds []int
	// ChangePercent, when above 0, raises an alert when a day's spend is
	// more than this percentage above the mean of the seven days before.
	ChangePercent int
	CreatedAt     time.Time
}

// BudgetAlert is an alert a budget raised. Key tells it apart within its
// budget (a threshold is crossed once a month, a change once a day).
type BudgetAlert struct {
	Seq       int64
	BudgetID  string
	ProjectID string
	Name      string
	// Kind is "spend" (Threshold percent of the budget spent), "forecast"
	// (the month-end forecast reaches the budget) or "change" (a day's
	// spend jumped).
	Kind      string
	Threshold int
	Key       string
	Month     string
	At        time.Time
	// Spend and Forecast are dollars, to the cent; Message says it all.
	Spend, Forecast string
	Message         string
}

// Budget alert kinds.
const (
	AlertSpend    = "spend"
	AlertForecast = "forecast"
	AlertChange   = "change"
)
