// Package webhook tells schedulers that live outside a tenant's
// Kubernetes or Slurm (a Ray autoscaler, SkyPilot, a queue's worker pool)
// of their clusters' lifecycle events: signed CloudEvents POSTed to the
// endpoints their project registered, at least once.
//
// The model is an outbox. Lifecycle events are already committed by the
// controller, the PreemptionNotified notice at T+0 in the plan's own
// transaction. The dispatcher (dispatch.go) reads them after a cursor
// kept in the store and, in one transaction, writes a message per event
// (its CloudEvents body, made once: every retry sends the same bytes
// under the same ID) and a delivery per endpoint that asked for it, and
// moves the cursor. The sender (sender.go) starts an attempt for each due
// delivery (post.go: signed as Standard Webhooks sign, within a timeout,
// redirects not followed, to addresses the policy allows: policy.go),
// and writes its outcome (those that end together in one transaction):
// delivered on a 2xx, else tried again after a growing, jittered gap
// (backoff.go) until a day has passed, then failed.
// A crash or a failover loses nothing: the next leader's Service reads
// the same cursor and the same due deliveries. An attempt whose outcome
// was not written is made again, so a receiver may see a delivery twice
// and de-duplicates by its ID (pkg/webhooks.Dedup).
//
// Nothing on the reclaim's path waits for any of it: the Service runs on
// its own goroutines, reads what was committed after the commit, and
// writes only its own tables. One slow or dead endpoint holds up nothing
// but its own deliveries (see sender.go for the bounds).
package webhook
