#!/usr/bin/env bash
# Make Redis and HAProxy ready for the replica tests and benchmark: install Debian's redis-server
# and haproxy when missing, start a Redis on 127.0.0.1:$REDIS_PORT (no persistence) when none
# answers there. Idempotent. The tests start their own Redis and HAProxy processes from these
# binaries; the one started here serves benchmarks/replicas.py and trying things by hand.
set -euo pipefail

REDIS_PORT="${REDIS_PORT:-6390}"
REDIS_LOG="${REDIS_LOG:-/tmp/redis-$REDIS_PORT.log}"

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "redis.sh: ${missing[*]} missing and not root; run it as root (sudo .ci/redis.sh)" >&2
    exit 1
  fi
  echo "redis.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  export NEEDRESTART_SUSPEND=1
  apt-get update -qq
  # policy-rc.d keeps the packages' own services from starting: we start what we need, where we
  # need it. One the machine already has is left as it is.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "redis.sh: starting redis-server on 127.0.0.1:$REDIS_PORT (log: $REDIS_LOG)"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --daemonize yes --logfile "$REDIS_LOG"
  for ((i = 0; i < 30; i++)); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 1
  done
  redis-cli -p "$REDIS_PORT" ping >/dev/null
fi
