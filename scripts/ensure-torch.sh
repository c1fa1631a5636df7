#!/usr/bin/env bash
# Makes sure Debian's PyTorch (python3-torch: a CPU build with
# torch.distributed and gloo) is there for the tests that run the Python
# SDK's PyTorch examples (internal/simjob), for Debian's /usr/bin/python3:
# a python3 earlier on PATH may not see it. It installs the package where
# it is missing (about 1.5 minutes), and fails loudly otherwise: those
# tests never skip.
set -euo pipefail

py=${SPARECAP_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
	echo "PyTorch missing for $py; installing python3-torch from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq python3-torch >/dev/null; }; then
		echo "cannot install python3-torch with apt-get; the PyTorch examples' tests need it" >&2
		exit 1
	fi
fi
"$py" -c 'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available(), "torch.distributed without gloo"; print("PyTorch", torch.__version__, "with gloo ready for '"$py"'")'
