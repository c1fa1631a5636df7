package apiv1

import (
	"encoding/json"
	"time"
)

// CreateSimulationRequest is the body of POST /v1/simulations: a scenario
// (the fields of a `sparecap simulate` scenario file, as JSON; without
// "fleet" the server's own fleet and prices) and, optionally, a trace
// whose demand replaces the scenario's random process.
type CreateSimulationRequest struct {
	Scenario json.RawMessage `json:"scenario" api:"required"`
	Trace    string          `json:"trace,omitempty"`
	// TraceFormat is the trace's format: "sparecap" (the default),
	// "alibaba-gpu-2023" or "alibaba-spot-2026".
	TraceFormat string `json:"trace_format,omitempty"`
}

// Simulation is a simulation's status: queued, running, done, failed or
// cancelled; Result (the same JSON as `sparecap simulate -o json`) once
// done, in GET /v1/simulations/{id} only.
type Simulation struct {
	ID         string             `json:"id"`
	Status     string             `json:"status"`
	Error      string             `json:"error,omitempty"`
	CreatedAt  time.Time          `json:"created_at"`
	StartedAt  *time.Time         `json:"started_at,omitempty"`
	FinishedAt *time.Time         `json:"finished_at,omitempty"`
	Progress   SimulationProgress `json:"progress"`
	Result     json.RawMessage    `json:"result,omitempty"`
}

// SimulationProgress is how far the running policy is, in virtual time.
type SimulationProgress struct {
	Policy       string  `json:"policy,omitempty"`
	DoneSeconds  float64 `json:"done_seconds"`
	TotalSeconds float64 `json:"total_seconds"`
}

// SimulationList is GET /v1/simulations, newest first.
type SimulationList struct {
	Simulations []Simulation `json:"simulations"`
}
