#!/usr/bin/env bash
# Make the browser tests' tools ready: Debian's Chromium and its driver, and axe-core (npm) as one
# file at .cache/axe-core/axe.min.js, which the tests read; nothing is downloaded at test time.
# Idempotent, and silent when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

AXE_VERSION=4.14.1
AXE_DIR=.cache/axe-core
AXE_FILE="$AXE_DIR/axe.min.js"

axe_ready() {
  # The minified file opens with a banner naming its version, so an upgrade here replaces it.
  [[ -f "$AXE_FILE" ]] && head -c 200 "$AXE_FILE" | grep -q "axe v$AXE_VERSION\b"
}

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if ! axe_ready && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "browser.sh: ${missing[*]} missing and not root; run it as root (sudo .ci/browser.sh)" >&2
    exit 1
  fi
  echo "browser.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  export NEEDRESTART_SUSPEND=1 # no service restart prompt from needrestart after the install
  apt-get update -qq
  # Waits for another apt run to finish instead of failing on its lock.
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

if ! axe_ready; then
  echo "browser.sh: installing axe-core $AXE_VERSION into $AXE_FILE"
  mkdir -p "$AXE_DIR"
  work=$(mktemp -d "$AXE_DIR/.download.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # npm checks the tarball against the registry's integrity hash.
  tarball=$(npm pack --silent --pack-destination "$work" "axe-core@$AXE_VERSION")
  tar -xzf "$work/$tarball" -C "$work" package/axe.min.js
  mv "$work/package/axe.min.js" "$AXE_FILE"
  axe_ready || { echo "browser.sh: $AXE_FILE does not name axe v$AXE_VERSION" >&2; exit 1; }
fi
