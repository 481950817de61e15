#!/usr/bin/env bash
# Make Docker and the sandbox image ready: install the engine and debootstrap when missing,
# start dockerd when it does not answer, build the image when missing or stale. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
DOCKERD_WAIT="${DOCKERD_WAIT:-60}"

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "docker.sh: ${missing[*]} missing and not root; install them first" >&2
    exit 1
  fi
  echo "docker.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "docker.sh: starting dockerd (log: $DOCKERD_LOG)"
  nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  for ((i = 0; i < DOCKERD_WAIT; i++)); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "docker.sh: dockerd did not answer within ${DOCKERD_WAIT} s; last lines of $DOCKERD_LOG:" >&2
    tail -n 20 "$DOCKERD_LOG" >&2
    exit 1
  fi
fi

"$PYTHON" -m gateway sandbox build
