"""The README's Python client runs, as written, against a real gateway: it cannot fall behind the SDK."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import pytest

from tests.support.harness import REPO, http_gateway, make_config

pytestmark = pytest.mark.anyio

README = REPO / "README.md"
WRITTEN_URL = "http://127.0.0.1:8000/mcp"


def client_snippet() -> str:
    """The Python code block of the README's "A Python client" section."""
    section = README.read_text(encoding="utf-8").split("### A Python client", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section has a Python code block"
    return found.group(1)


async def test_the_readme_s_python_client_lists_the_tools_and_calls_one(tmp_path: Path) -> None:
    snippet = client_snippet()
    assert WRITTEN_URL in snippet
    calc = {"command": sys.executable, "args": ["-m", "servers.calc"], "cwd": str(REPO)}
    async with http_gateway(make_config(tmp_path, {"calc": calc})) as (_, url):
        script = tmp_path / "client.py"
        script.write_text(snippet.replace(WRITTEN_URL, f"{url}/mcp"), encoding="utf-8")
        ran = await anyio.run_process([sys.executable, str(script)], check=False)

    assert ran.returncode == 0, ran.stderr.decode()
    listed, answer = ran.stdout.decode().splitlines()
    assert "'calc__evaluate'" in listed
    assert answer == "42"
