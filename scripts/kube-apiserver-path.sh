#!/usr/bin/env bash
# Prints where the cached kube-apiserver lives (see kube-paths.sh, which
# names every binary of the tests' mini cluster the same way).
set -euo pipefail
exec "$(dirname "$0")/kube-paths.sh" kube-apiserver
