// Package kueuetest holds the tests of the queue integrations against the
// real components: sparecap's controller, Kubernetes driver and queue
// manager, in process, driving a mini cluster (kube-apiserver,
// controller-manager, scheduler, kwok) that runs Kueue's manager built from
// its Go module (internal/kube/kubeenv). The Kueue objects the tests
// create are docs/queues.md's own snippets.
package kueuetest
