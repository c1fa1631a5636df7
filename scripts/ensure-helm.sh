#!/usr/bin/env bash
# Makes sure the chart's test (deploy/helm) has its tools: the helm CLI
# built from the helm.sh/helm/v3 Go module pinned in tools/helm, and
# kubeconform from github.com/yannh/kubeconform pinned in tools/kubeconform.
# They are cached outside the checkout, each keyed by its module's version
# and go.sum (see scripts/helm-paths.sh), so only the first run pays for the
# builds (about 14 minutes on 2 cores with an empty Go build cache, nearly
# all of it helm). It prints the tools' paths last; the test finds them
# through scripts/helm-paths.sh (or at $SPARECAP_HELM,
# $SPARECAP_KUBECONFORM). It fails loudly: the test never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

# build NAME TOOLS-DIR PACKAGE VERSION-ARG OVERRIDE [LDFLAGS]: builds PACKAGE
# in tools/TOOLS-DIR into the cache unless it is there, then checks that it
# runs with VERSION-ARG. With the variable OVERRIDE set, nothing is built:
# the binary it names must run.
build() {
	local bin tmp start
	bin=$(scripts/helm-paths.sh "$1")
	if [ -n "${!5:-}" ] && [ ! -x "$bin" ]; then
		echo "\$$5=$bin is not an executable file" >&2
		exit 1
	fi
	if [ ! -x "$bin" ]; then
		echo "building $1 into $bin (first run only)"
		mkdir -p "$(dirname "$bin")"
		tmp="$bin.tmp.$$"
		start=$SECONDS
		if ! (cd "tools/$2" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${6:-}" -o "$tmp" "$3"); then
			rm -f "$tmp"
			echo "building $1 failed" >&2
			exit 1
		fi
		mv "$tmp" "$bin"
		echo "built $1 in $((SECONDS - start)) s"
	fi
	if ! "$bin" "$4"; then
		echo "$bin does not run; delete it and run this script again" >&2
		exit 1
	fi
}

# require TOOLS-DIR MODULE: the version of MODULE that tools/TOOLS-DIR pins.
require() {
	awk -v m="$2" '($1 == "require" && $2 == m) { print $3; exit }
		($1 == m && $2 ~ /^v/) { print $2; exit }' "tools/$1/go.mod"
}

# What helm's own Makefile sets: its version, and the Kubernetes version of
# its default capabilities and deprecation checks (1.N for client-go v0.N),
# which would otherwise be v1.20.
helm_version=$(require helm helm.sh/helm/v3)
kube_minor=$(require helm k8s.io/client-go | cut -d. -f2)
helm_ldflags=""
for v in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	helm_ldflags+=" -X $v.k8sVersionMajor=1 -X $v.k8sVersionMinor=$kube_minor"
done
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.version=$helm_version"
build helm helm helm.sh/helm/v3/cmd/helm version SPARECAP_HELM "$helm_ldflags"
build kubeconform kubeconform github.com/yannh/kubeconform/cmd/kubeconform -v SPARECAP_KUBECONFORM \
	"-X main.version=$(require kubeconform github.com/yannh/kubeconform)"
scripts/helm-paths.sh
