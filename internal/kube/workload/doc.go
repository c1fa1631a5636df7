// Package workload holds the test of real work across reclaims: sparecap
// lends nodes to a mini cluster (kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok's simulated kubelets, see kubeenv), takes them
// back several times, and the tenant's Job and Deployment carry on as the
// docs promise. It has no code of its own.
package workload
