#!/usr/bin/env bash
# Makes sure the Kubernetes integration tests (internal/kube/...) have what
# they need: etcd built from go.etcd.io/etcd/server/v3 pinned in tools/etcd
# (3.5 or later: kube-apiserver runs with its watch cache); kube-apiserver,
# kube-controller-manager and kube-scheduler built from the k8s.io/kubernetes
# Go module pinned in tools/kube-apiserver; kwok (simulated kubelets) built
# from sigs.k8s.io/kwok pinned in tools/kwok; Kueue's manager from
# sigs.k8s.io/kueue pinned in tools/kueue, and the JobSet controller and
# the KubeRay operator at the versions that Kueue requires (the script
# checks), from tools/jobset and tools/kuberay; and, copied into one
# directory from the modules' sources, the CRDs and webhook manifests the
# tests install (Kueue's, JobSet's, KubeRay's, and the ProvisioningRequest
# CRD of the k8s.io/autoscaler/cluster-autoscaler/apis Kueue requires).
# The binaries are cached outside the checkout, each keyed by its module's
# version and go.sum (see scripts/kube-paths.sh), so only the first run
# pays for the builds (about 10 minutes on 2 cores for the first five, and
# about as long again for Kueue, JobSet and KubeRay). It prints the paths
# last; the tests find them at the same places (or at
# $SPARECAP_KUBE_APISERVER, $SPARECAP_KUBE_CONTROLLER_MANAGER,
# $SPARECAP_KUBE_SCHEDULER, $SPARECAP_KWOK, $SPARECAP_ETCD, $SPARECAP_KUEUE,
# $SPARECAP_JOBSET, $SPARECAP_KUBERAY, $SPARECAP_KUEUE_MANIFESTS).
#
# Kueue's manager, run without its internal certificate management as the
# tests run it, loads a metrics serving certificate from the fixed path
# /etc/kueue/metrics/certs (where a Kueue Deployment mounts it from a
# Secret); this script puts a self-signed one there if none is. It fails
# loudly: those tests never skip.
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
# JobSet and KubeRay must be the versions Kueue integrates.
for m in sigs.k8s.io/jobset:jobset github.com/ray-project/kuberay/ray-operator:kuberay; do
	want=$(awk -v m="${m%%:*}" '$1 == m { print $2 }' tools/kueue/go.mod)
	have=$(awk -v m="${m%%:*}" '$1 == "require" && $2 == m { print $3 }' "tools/${m##*:}/go.mod")
	if [ -z "$want" ] || [ "$want" != "$have" ]; then
		echo "tools/${m##*:} pins ${m%%:*} $have, but the Kueue of tools/kueue requires ${want:-none}" >&2
		exit 1
	fi
done
# These controllers have no --version; --help exits 0.
build kueue kueue sigs.k8s.io/kueue/cmd/kueue --help
build jobset jobset sigs.k8s.io/jobset --help
build kuberay-operator kuberay github.com/ray-project/kuberay/ray-operator --help

# moddir MODULE: where the Go module cache holds MODULE, the version that
# tools/kueue requires (downloaded if missing).
moddir() {
	(cd tools/kueue && go mod download "$1" && go list -m -f '{{.Dir}}' "$1")
}

# The manifests the tests install, copied from the modules' sources so that
# the tests need neither the module cache nor the network.
manifests=$(scripts/kube-paths.sh kueue-manifests)
if [ ! -d "$manifests" ]; then
	echo "copying Kueue's, JobSet's, KubeRay's and the ProvisioningRequest manifests into $manifests"
	tmp="$manifests.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp"/{kueue,jobset,kuberay,provisioningrequest}/crds
	kueue=$(moddir sigs.k8s.io/kueue)
	jobset=$(moddir sigs.k8s.io/jobset)
	kuberay=$(moddir github.com/ray-project/kuberay/ray-operator)
	autoscaler=$(moddir k8s.io/autoscaler/cluster-autoscaler/apis)
	cp "$kueue"/config/components/crd/bases/*.yaml "$tmp/kueue/crds/"
	cp "$kueue/config/components/webhook/manifests.yaml" "$tmp/kueue/webhook.yaml"
	cp "$jobset"/config/components/crd/bases/*.yaml "$tmp/jobset/crds/"
	cp "$jobset/config/components/webhook/manifests.yaml" "$tmp/jobset/webhook.yaml"
	cp "$kuberay"/config/crd/bases/*.yaml "$tmp/kuberay/crds/"
	cp "$autoscaler/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$tmp/provisioningrequest/crds/"
	chmod -R u+w "$tmp"
	mv "$tmp" "$manifests"
fi

# Kueue's metrics certificate (see above): self-signed, for loopback; no
# test checks it, Kueue only refuses to start without one.
certs=/etc/kueue/metrics/certs
if ! openssl x509 -checkend 2592000 -noout -in "$certs/tls.crt" >/dev/null 2>&1 || [ ! -s "$certs/tls.key" ]; then
	echo "writing a self-signed metrics certificate for Kueue into $certs"
	mkdir -p "$certs"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
		-subj /CN=kueue-metrics -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
		-keyout "$certs/tls.key.tmp" -out "$certs/tls.crt.tmp" 2>/dev/null
	mv "$certs/tls.key.tmp" "$certs/tls.key"
	mv "$certs/tls.crt.tmp" "$certs/tls.crt"
fi
scripts/kube-paths.sh
