#!/usr/bin/env bash
# Makes sure a python3 (3.8 or later) is there for the Python SDK's tests
# (sdk/python/tests) and the Go/Python checkpoint interop test
# (pkg/preempt). It installs Debian's python3 where it is missing, and
# fails loudly otherwise: those tests never skip.
set -euo pipefail

if ! command -v python3 >/dev/null; then
	echo "python3 missing; installing python3 from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }; then
		echo "cannot install python3 with apt-get; the Python SDK's tests need it" >&2
		exit 1
	fi
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))'; then
	echo "$(python3 --version 2>&1) is too old: the Python SDK needs 3.8 or later" >&2
	exit 1
fi
echo "$(python3 --version) ready at $(command -v python3)"
