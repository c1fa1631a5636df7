#!/usr/bin/env bash
# Makes sure Slurm's own daemons and client commands (Debian's slurmctld,
# slurmd, slurm-client) and munge are installed for the Slurm driver's
# tests, which start a Slurm of their own on loopback (internal/slurm/
# slurmenv). It installs them from Debian's packages when missing and fails
# loudly otherwise: the tests never skip without them.
set -euo pipefail

need=(slurmctld slurmd scontrol squeue scancel sinfo munged mungekey unshare)

missing() {
	for c in "${need[@]}"; do
		if ! command -v "$c" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$c" ]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

if m=$(missing); then
	echo "Slurm or munge missing ($m); installing slurmctld slurmd slurm-client munge from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	# The packages' postinst scripts would start the daemons; the tests
	# start their own, so keep the service starts off.
	policy=/usr/sbin/policy-rc.d
	made_policy=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		made_policy=1
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge util-linux >/dev/null
	if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
fi

if m=$(missing); then
	echo "Slurm is not installed ($m is missing); the Slurm driver's tests need slurmctld, slurmd, slurm-client and munge" >&2
	exit 1
fi
echo "Slurm $(dpkg-query -W -f='${Version}' slurmctld) and munge are installed"
