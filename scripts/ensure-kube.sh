#!/usr/bin/env bash
# Makes sure the Kubernetes integration tests (internal/kube/...) have what
# they need: etcd from Debian's etcd-server package; kube-apiserver,
# kube-controller-manager and kube-scheduler built from the k8s.io/kubernetes
# Go module pinned in tools/kube-apiserver; kwok (simulated kubelets) built
# from sigs.k8s.io/kwok pinned in tools/kwok. The binaries are cached
# outside the checkout, each keyed by its module's version and go.sum (see
# scripts/kube-paths.sh), so only the first run pays for the builds (about
# 10 minutes on 2 cores for all four). It prints the binaries' paths last;
# the tests find them at the same places (or at $SPARECAP_KUBE_APISERVER,
# $SPARECAP_KUBE_CONTROLLER_MANAGER, $SPARECAP_KUBE_SCHEDULER,
# $SPARECAP_KWOK). It fails loudly: those tests never skip.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v etcd >/dev/null 2>&1; then
	echo "etcd missing; installing etcd-server from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq etcd-server >/dev/null; }; then
		echo "cannot install etcd-server with apt-get; the Kubernetes integration tests need etcd" >&2
		exit 1
	fi
fi
# Not "| head -1": head exits after one line, etcd then dies of SIGPIPE and
# pipefail turns that into a failure (CI failed that way).
etcd_version=$(etcd --version)
echo "${etcd_version%%$'\n'*}"

# build NAME TOOLS-DIR PACKAGE: builds PACKAGE in tools/TOOLS-DIR into the
# cache unless it is there, then checks that it runs.
build() {
	local bin tmp start
	bin=$(scripts/kube-paths.sh "$1")
	if [ ! -x "$bin" ]; then
		echo "building $1 into $bin (first run only)"
		mkdir -p "$(dirname "$bin")"
		tmp="$bin.tmp.$$"
		start=$SECONDS
		if ! (cd "tools/$2" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp" "$3"); then
			rm -f "$tmp"
			echo "building $1 failed" >&2
			exit 1
		fi
		mv "$tmp" "$bin"
		echo "built $1 in $((SECONDS - start)) s"
	fi
	if ! "$bin" --version; then
		echo "$bin does not run; delete it and run this script again" >&2
		exit 1
	fi
}

build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
scripts/kube-paths.sh
