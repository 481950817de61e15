"""Importing the gateway loads nothing it needs only for sandboxes, JWTs or tool search: start-up stays fast."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.harness import REPO

# docker-py (with requests), PyJWT and the stemmer load when a sandboxed tool, a JWT or a search first needs them.
LAZY = ("docker", "requests", "jwt", "snowballstemmer", "gateway.sandbox.source", "gateway.sandbox.containers")


def _run(probe: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_the_command_line_loads_neither_docker_nor_jwt_nor_the_stemmer() -> None:
    probe = f"import json, sys; import gateway.cli; print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))"
    assert json.loads(_run(probe)) == []


def test_the_sandbox_package_still_offers_its_names() -> None:
    probe = "import gateway.sandbox as s; print(s.DockerSandbox.__name__, s.sweep.__name__, s.SandboxLimits.__name__)"
    assert _run(probe).split() == ["DockerSandbox", "sweep", "SandboxLimits"]
