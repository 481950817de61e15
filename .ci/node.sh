#!/usr/bin/env bash
# Make Node ready for the interop tests and the conformance run: install Node and npm from Debian when
# missing, then the pinned npm packages (the official conformance suite and the reference
# "everything" server) into a cache outside git, so nothing is downloaded while tests run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where tests/support/node.py looks for them.
NODE_PREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/mcp-gateway/node"
# Pinned: newer conformance releases crash on Node 20.
PACKAGES=(
  @modelcontextprotocol/conformance@0.1.12
  @modelcontextprotocol/server-everything@2026.8.31
)

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "node.sh: ${missing[*]} missing and not root; install them first" >&2
    exit 1
  fi
  echo "node.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

major=$(node -p 'process.versions.node.split(".")[0]')
if ((major < 20)); then
  echo "node.sh: Node $(node --version) is too old; the conformance suite needs Node 20 or newer" >&2
  exit 1
fi

installed() {
  local name="${1%@*}" version="${1##*@}"
  local manifest="$NODE_PREFIX/node_modules/$name/package.json"
  [[ -f $manifest ]] && [[ $(node -p "require('$manifest').version") == "$version" ]]
}

wanted=()
for package in "${PACKAGES[@]}"; do
  installed "$package" || wanted+=("$package")
done
if ((${#wanted[@]})); then
  echo "node.sh: installing ${wanted[*]} into $NODE_PREFIX"
  mkdir -p "$NODE_PREFIX"
  npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >/dev/null
fi
