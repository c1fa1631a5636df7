// Package steprun runs the steps of many independent keys (a node, a
// node's cleanup), each when it is due, and owns everything about when:
// a timer queue keyed by each key's Due, the backoff of a failed step,
// the claims that keep one step of a key running at a time, and fixed
// worker pools.
//
// A step is a function of a key that does one step of work and answers
// when the key is due next (Due). The runner never walks keys to find the
// due ones: whoever changes a key's state calls Add (the controller, after
// it commits a node), and a step's answer reschedules its own key, as
// Kubernetes' delaying workqueue and Karpenter's Result{RequeueAfter} do.
//
// Time and randomness are inputs (Config.Clock, Config.Random), and the
// runner spawns no goroutine per key: Run keeps one timer goroutine and
// the pools' workers, so the same runner serves the server on the real
// clock and a simulator on a virtual one. RunNow is the synchronous form
// a test (or a simulator's tick) uses: it runs the keys it is given, in
// order, and waits for them.
//
// Contract:
//   - At most one step of a key runs at a time, in Run and RunNow alike;
//     Claim takes the same claim for work done outside the runner.
//   - A key added while its step runs is run again once the step ends
//     (the change may have come after the step read its state).
//   - A failed step is retried after its backoff (doubling, jittered), but
//     never later than its Due.By, once By is ahead of the failure: a
//     drain's deadline step does not wait for the failures of its notice.
//   - A step that succeeds is run again at its Due.At; a zero At drops the
//     key until someone adds it again.
package steprun
