#!/usr/bin/env bash
# The package as a user installs it: build the sdist and the wheel, check their metadata, install
# the wheel into a fresh virtualenv outside the checkout, and serve-check the embedded defaults
# from there (bundled servers and skills, the sandbox image current). Needs .ci/docker.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
.venv/bin/python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
.venv/bin/twine check --strict "$work"/dist/*
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$work"/dist/*.whl
cd "$work"
export GATEWAY_DATA_DIR="$work/data"
"$work/venv/bin/mcp-gateway" sandbox build | tee "$work/sandbox.log"
grep -q "is current" "$work/sandbox.log"
"$work/venv/bin/mcp-gateway" --log-level WARNING check | tee "$work/check.log"
for skill in data-analysis file-organisation quick-math; do
  grep -q "\[ok\] skill $skill " "$work/check.log" || { echo "package.sh: bundled skill $skill missing" >&2; exit 1; }
done
if grep -q "\[FAIL\]" "$work/check.log"; then
  echo "package.sh: the installed wheel does not serve its defaults" >&2
  exit 1
fi
echo "package.sh: the wheel installs and serves its defaults"
