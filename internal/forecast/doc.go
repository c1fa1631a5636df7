// Package forecast says how many GPUs of a pool preemptible tenants can
// expect hour by hour over the next days: the pool's lendable GPUs (in
// service, not held by standard nodes) in each past hour, and for each
// hour ahead the same hours of the week in the weeks before, two hours
// either side, as an expected value (their median) and a 90% interval.
// Pure: nodes, machines and the time are inputs.
package forecast
