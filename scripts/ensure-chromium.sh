#!/usr/bin/env bash
# Makes sure the headless Chromium that the console's browser tests
# (e2e/console_test.go) drive is installed at /usr/bin/chromium. It installs
# it from Debian's packages where it is missing, and fails loudly otherwise:
# those tests never skip.
set -euo pipefail

chromium=/usr/bin/chromium

if [ ! -x "$chromium" ]; then
	echo "Chromium missing at $chromium; installing chromium from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }; then
		echo "cannot install chromium with apt-get; the console's browser tests (e2e/console_test.go) need $chromium" >&2
		exit 1
	fi
fi

if [ ! -x "$chromium" ]; then
	echo "$chromium is still missing after installing chromium; the console's browser tests need it" >&2
	exit 1
fi
if ! version=$("$chromium" --version 2>/dev/null); then
	echo "$chromium does not run (\`$chromium --version\` failed); the console's browser tests need it" >&2
	exit 1
fi
echo "$version ready at $chromium"
