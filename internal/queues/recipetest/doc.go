// Package recipetest holds the tests of docs/queues.md's recipes for
// JobSet, KubeRay and the cost tools. Each applies the page's very text
// (docs.Snippet) to the real component, built from its Go module and run
// in a mini cluster (internal/kube/kubeenv: kube-apiserver,
// controller-manager, scheduler and kwok, with JobSet's controller and
// KubeRay's operator), and drives real reclaims through sparecap's
// controller and Kubernetes driver in process (internal/queues/testworld).
//
// kwok plays the pods: it runs no container, so a test stands in for
// the workload with kwok's annotations (how long the work takes, how
// long a pod takes to exit after its SIGTERM), added to the snippet's
// pod templates by the test, never to the page.
package recipetest
