#!/usr/bin/env bash
# Prints where the cached Kubernetes binaries of the integration tests live:
# under the user's cache directory, each named after the version its tools
# module pins and a hash of that module's go.sum, so a change of version
# builds a new one. internal/kube/kubeenv/paths.go computes the same paths.
#
#   scripts/kube-paths.sh NAME   the path of one binary
#   scripts/kube-paths.sh        "NAME PATH" for every binary, one a line
#
# NAME is kube-apiserver, kube-controller-manager, kube-scheduler (built
# from k8s.io/kubernetes, pinned in tools/kube-apiserver), kwok (from
# sigs.k8s.io/kwok, pinned in tools/kwok), etcd (from
# go.etcd.io/etcd/server/v3, pinned in tools/etcd), kueue (Kueue's
# manager, from sigs.k8s.io/kueue pinned in tools/kueue), jobset (JobSet's
# controller, from sigs.k8s.io/jobset pinned in tools/jobset),
# kuberay-operator (KubeRay's operator, from
# github.com/ray-project/kuberay/ray-operator pinned in tools/kuberay), or
# kueue-manifests, a directory of the CRDs and webhook manifests of the
# versions tools/kueue requires, and the ProvisioningRequest CRD, copied
# from their sources.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/tool-path.sh

one() {
	case $1 in
	# Built with their version stamped, as a release is (see
	# scripts/ensure-kube.sh).
	kube-apiserver | kube-controller-manager | kube-scheduler) path "$1" kube-apiserver k8s.io/kubernetes version-stamped ;;
	kwok) path "$1" kwok sigs.k8s.io/kwok ;;
	etcd) path "$1" etcd go.etcd.io/etcd/server/v3 ;;
	kueue | kueue-manifests) path "$1" kueue sigs.k8s.io/kueue ;;
	jobset) path "$1" jobset sigs.k8s.io/jobset ;;
	kuberay-operator) path "$1" kuberay github.com/ray-project/kuberay/ray-operator ;;
	*)
		echo "unknown binary $1" >&2
		exit 2
		;;
	esac
}

if [ $# -gt 0 ]; then
	one "$1"
	exit
fi
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kueue jobset kuberay-operator kueue-manifests; do
	p=$(one "$name")
	echo "$name $p"
done
