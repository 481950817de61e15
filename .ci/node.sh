#!/usr/bin/env bash
# Make Node ready for the interop tests and the conformance run: install Node and npm from Debian when
# missing, then the npm packages of .ci/npm (the official conformance suite, the reference
# "everything" server, an MCP Apps example server and the OpenID provider `oidc-provider` of the
# identity tests) into a cache outside git, so nothing is downloaded while tests run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where tests/support/node.py looks for them.
NODE_PREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/mcp-gateway/node"
# The packages, pinned with every dependency by the lock file (the conformance suite at 0.1.12, as
# newer releases crash on Node 20).
MANIFEST=.ci/npm

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

# npm ci replaces node_modules, so it runs only when the cached copy of the lock file is not this one.
if ! cmp -s "$MANIFEST/package-lock.json" "$NODE_PREFIX/package-lock.json" ||
  [[ ! -f $NODE_PREFIX/node_modules/.package-lock.json ]]; then
  echo "node.sh: installing the packages of $MANIFEST/package.json into $NODE_PREFIX"
  mkdir -p "$NODE_PREFIX"
  cp "$MANIFEST/package.json" "$MANIFEST/package-lock.json" "$NODE_PREFIX/"
  npm ci --prefix "$NODE_PREFIX" --no-audit --no-fund --loglevel=error >/dev/null
fi
