#!/usr/bin/env bash
# Makes sure the Kubernetes integration tests (internal/kube/...) have what
# they need: etcd built from go.etcd.io/etcd/server/v3 pinned in tools/etcd
# (3.5 or later: kube-apiserver runs with its watch cache); kube-apiserver,
# kube-controller-manager and kube-scheduler built from the k8s.io/kubernetes
# Go module pinned in tools/kube-apiserver; kwok (simulated kubelets) built
# from sigs.k8s.io/kwok pinned in tools/kwok. The binaries are cached
# outside the checkout, each keyed by its module's version and go.sum (see
# scripts/kube-paths.sh), so only the first run pays for the builds (about
# 10 minutes on 2 cores for all five). It prints the binaries' paths last;
# the tests find them at the same places (or at $SPARECAP_KUBE_APISERVER,
# $SPARECAP_KUBE_CONTROLLER_MANAGER, $SPARECAP_KUBE_SCHEDULER,
# $SPARECAP_KWOK, $SPARECAP_ETCD). It fails loudly: those tests never skip.
set -euo pipefail
cd "$(dirname "$0")/.."

# build NAME TOOLS-DIR PACKAGE [CHECK-ARG [LDFLAGS]]: builds PACKAGE in
# tools/TOOLS-DIR into the cache unless it is there, with LDFLAGS added,
# then checks that it runs with CHECK-ARG (default --version).
build() {
	local bin tmp start
	bin=$(scripts/kube-paths.sh "$1")
	if [ ! -x "$bin" ]; then
		echo "building $1 into $bin (first run only)"
		mkdir -p "$(dirname "$bin")"
		tmp="$bin.tmp.$$"
		start=$SECONDS
		if ! (cd "tools/$2" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${5:-}" -o "$tmp" "$3"); then
			rm -f "$tmp"
			echo "building $1 failed" >&2
			exit 1
		fi
		mv "$tmp" "$bin"
		echo "built $1 in $((SECONDS - start)) s"
	fi
	if [ "${4:---version}" = --version ]; then
		"$bin" --version && return
	else
		"$bin" "$4" >/dev/null 2>&1 && return
	fi
	echo "$bin does not run; delete it and run this script again" >&2
	exit 1
}

# The Kubernetes binaries report the version they were built from, as a
# release does (hack/lib/version.sh); unstamped, the API server's /version
# says v0.0.0-master+$Format:%H$, which clients that check the server's
# version (Kueue's manager) cannot parse.
kube=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }
	$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' tools/kube-apiserver/go.mod)
major=${kube#v}
minor=${major#*.}
stamp=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	stamp="$stamp -X $pkg.gitVersion=$kube -X $pkg.gitMajor=${major%%.*} -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
done
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver --version "$stamp"
build kube-controller-manager kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager --version "$stamp"
build kube-scheduler kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler --version "$stamp"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build etcd etcd go.etcd.io/etcd/server/v3
scripts/kube-paths.sh
