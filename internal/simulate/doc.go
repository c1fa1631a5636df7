// Package simulate answers "what if" with sparecap's own control plane:
// a scenario (a fleet, on-demand clusters arriving and leaving, tenants'
// preemptible targets, a job model and a policy) runs through the
// production controller, allocator, reclaim machine, step runner, meter
// and price book on a virtual clock that jumps from one due time to the
// next (controller.Tick), against the simulated fleet (package sim) and
// an in-memory SQLite store behind the leader's cache. Nothing sleeps and
// nothing reads the wall clock, so a seed gives the same answer to the
// byte.
//
// Demand is a seeded random process (Generate) or a trace in sparecap's
// own CSV format (ReadTrace). The result (Result) has, per tenant,
// the preemptible GPU-hours delivered, the reclaims, the work they lost
// under the job model and the bill against on-demand; per operator, the
// fleet's GPU-hours by use, what was lent out of idle and out of
// reserved capacity, revenue, reclaims per pool and how long on-demand
// clusters waited for their nodes; and capacity over time. Compare runs
// two policies on the same demand.
package simulate
