// Package plan answers a tenant's questions before a job runs on
// preemptible capacity: what it will cost there and on standard nodes,
// how much later it will finish and how that varies, which checkpoint
// interval to use, at what preemption rate preemptible stops paying, and,
// given a deadline, a plan that meets it: run on preemptible nodes and
// move to standard nodes when the slack runs out.
//
// It is pure: the preemption rate (measured per pool by the server's
// statistics), the prices and the job come in, the plan goes out. The
// expectation is a formula (Young and Daly's interval, first-order
// overhead); the spread and the deadline plans, which no formula gives,
// come from a seeded Monte Carlo run of the job against a preemption
// process: Poisson reclaims at the measured rate, or a recorded
// availability trace (Availability; SkyPilot's spot traces read with
// ReadSkyPilot).
package plan
