#!/usr/bin/env bash
# Makes sure the Kubernetes integration tests (internal/kube/...) have what
# they need: etcd from Debian's etcd-server package and a kube-apiserver
# built from the k8s.io/kubernetes Go module pinned in tools/kube-apiserver.
# The binary is cached outside the checkout, keyed by that module's go.sum,
# so only the first run pays for the build (about 5 minutes on 2 cores).
# It prints the binary's path on its last line; the tests find it at the
# same place (or at $SPARECAP_KUBE_APISERVER). It fails loudly: those tests
# never skip.
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
etcd --version | head -1

bin=$(scripts/kube-apiserver-path.sh)
if [ ! -x "$bin" ]; then
	echo "building kube-apiserver into $bin (first run only; about 5 minutes)"
	mkdir -p "$(dirname "$bin")"
	tmp="$bin.tmp.$$"
	(cd tools/kube-apiserver && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$tmp" "$bin"
fi
if ! "$bin" --version; then
	echo "$bin does not run; delete it and run this script again" >&2
	exit 1
fi
echo "$bin"
