#!/usr/bin/env bash
# Makes sure the PostgreSQL the tests use is reachable: the one at
# 127.0.0.1:5432 (trust auth, database "test"), or $SPARECAP_TEST_POSTGRES.
# It starts a local cluster that has stopped, installs the server from
# Debian's packages where none is installed, and fails loudly otherwise.
set -euo pipefail

dsn="${SPARECAP_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if [ -n "${SPARECAP_TEST_POSTGRES:-}" ]; then
	echo "tests use PostgreSQL at \$SPARECAP_TEST_POSTGRES"
	exit 0
fi

if ! command -v pg_isready >/dev/null 2>&1; then
	echo "PostgreSQL client tools missing; installing postgresql from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
fi

if ! ready; then
	if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
		ver=$(ls /etc/postgresql | sort -V | tail -n 1)
		echo "starting PostgreSQL $ver"
		pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
		for _ in $(seq 1 30); do ready && break; sleep 1; done
	fi
fi

if ! ready; then
	echo "PostgreSQL is not reachable at 127.0.0.1:5432; the conformance and end-to-end tests need it" >&2
	exit 1
fi

# The tests connect as postgres to database test with trust auth.
if ! psql "$dsn" -qtAc 'select 1' >/dev/null 2>&1; then
	echo "creating database test"
	if ! su postgres -c "psql -qc 'create database test'" >/dev/null 2>&1 && ! psql -h 127.0.0.1 -U postgres -qc 'create database test'; then
		echo "cannot connect to $dsn and cannot create the database" >&2
		exit 1
	fi
fi
echo "PostgreSQL ready at 127.0.0.1:5432"
