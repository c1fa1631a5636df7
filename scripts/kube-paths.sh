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
# sigs.k8s.io/kwok, pinned in tools/kwok) or etcd (from
# go.etcd.io/etcd/server/v3, pinned in tools/etcd).
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
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
	p=$(one "$name")
	echo "$name $p"
done
