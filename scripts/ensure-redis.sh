#!/usr/bin/env bash
# Makes sure the Redis the Asynq recipe's tests use answers at
# 127.0.0.1:6379: it starts Debian's redis-server when nothing answers
# there (on loopback, keeping nothing on disk), installs it with apt-get
# when it is missing, and fails loudly otherwise: those tests never skip.
set -euo pipefail

ping() {
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]
	else
		# No client: speak the protocol through bash's /dev/tcp.
		{ exec 3<>/dev/tcp/127.0.0.1/6379; } 2>/dev/null || return 1
		printf 'PING\r\n' >&3
		local reply
		read -r -t 2 reply <&3 || true
		exec 3>&-
		[ "${reply%$'\r'}" = +PONG ]
	fi
}

if ping; then
	echo "Redis ready at 127.0.0.1:6379"
	exit 0
fi

if ! command -v redis-server >/dev/null 2>&1; then
	echo "redis-server missing; installing it from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
	if ping; then
		# The package started its own service: keep nothing on disk there too.
		redis-cli -h 127.0.0.1 -p 6379 config set save "" >/dev/null
		redis-cli -h 127.0.0.1 -p 6379 config set appendonly no >/dev/null
		echo "Redis ready at 127.0.0.1:6379 (started by the package)"
		exit 0
	fi
fi

echo "starting redis-server on 127.0.0.1:6379 (nothing kept on disk)"
mkdir -p /var/lib/redis /var/log/redis
redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
	--dir /var/lib/redis --logfile /var/log/redis/ci.log
for _ in $(seq 1 50); do
	ping && break
	sleep 0.2
done
if ! ping; then
	echo "Redis does not answer at 127.0.0.1:6379 (see /var/log/redis/ci.log); the Asynq recipe's tests need it" >&2
	tail -n 20 /var/log/redis/ci.log >&2 || true
	exit 1
fi
echo "Redis ready at 127.0.0.1:6379"
