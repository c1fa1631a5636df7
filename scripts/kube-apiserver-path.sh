#!/usr/bin/env bash
# Prints where the cached kube-apiserver lives: under the user's cache
# directory, named after the pinned version and a hash of its go.sum, so a
# change of version builds a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${SPARECAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparecap}
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' tools/kube-apiserver/go.mod)
sum=$(sha256sum tools/kube-apiserver/go.sum | cut -c1-12)
echo "$cache/kube-apiserver-$version-$sum"
