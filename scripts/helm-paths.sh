#!/usr/bin/env bash
# Prints where the cached chart-test tools live: under the user's cache
# directory, each named after the version its tools module pins and a hash
# of that module's go.sum, so a change of version builds a new one (the same
# scheme as scripts/kube-paths.sh). scripts/ensure-helm.sh builds them there;
# the chart's test (deploy/helm) runs this script to find them.
#
#   scripts/helm-paths.sh NAME   the path of one tool
#   scripts/helm-paths.sh        "NAME PATH" for every tool, one a line
#
# NAME is helm (built from helm.sh/helm/v3, pinned in tools/helm) or
# kubeconform (from github.com/yannh/kubeconform, pinned in
# tools/kubeconform). $SPARECAP_HELM and $SPARECAP_KUBECONFORM, when set,
# are printed instead of the cached builds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/tool-path.sh

one() {
	case $1 in
	helm)
		if [ -n "${SPARECAP_HELM:-}" ]; then echo "$SPARECAP_HELM"; else path helm helm helm.sh/helm/v3; fi
		;;
	kubeconform)
		if [ -n "${SPARECAP_KUBECONFORM:-}" ]; then echo "$SPARECAP_KUBECONFORM"; else path kubeconform kubeconform github.com/yannh/kubeconform; fi
		;;
	*)
		echo "unknown tool $1" >&2
		exit 2
		;;
	esac
}

if [ $# -gt 0 ]; then
	one "$1"
	exit
fi
for name in helm kubeconform; do
	p=$(one "$name")
	echo "$name $p"
done
