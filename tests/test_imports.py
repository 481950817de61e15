"""Importing the gateway loads nothing a command does not need: start-up stays fast.

`import gateway.cli.main` (what `--help`, `hash-key` and the commands against a running gateway pay)
loads neither the SDK nor an HTTP stack; `check` loads no HTTP front door nor web page; and
nothing loads docker-py, PyJWT, the stemmer or jsonschema-rs before a sandboxed tool, a JWT, a search
or a tool call needs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.harness import REPO

# docker-py (with requests), PyJWT, the stemmer and jsonschema-rs load when a sandboxed tool, a JWT, a search or a
# tool call first needs them.
LAZY = (
    "docker",
    "requests",
    "jwt",
    "snowballstemmer",
    "jsonschema_rs",
    "gateway.sandbox.source",
    "gateway.sandbox.containers",
)
# What serving needs and the command line alone does not: the SDK (with its HTTP stack), anyio, jsonschema.
SERVING = ("mcp", "mcp_types", "uvicorn", "starlette", "httpx2", "anyio", "jsonschema", "pydantic")
# The HTTP front door and the web page, which `check` does not serve.
FRONT_DOOR = ("gateway.frontdoors.httpapp", "gateway.web.app", "gateway.api.routes", "jinja2", "markdown_it")
# What the SDK's package `__init__` modules import and no command uses: the command line stands in for those packages.
SDK_UNUSED = ("mcp.client.client", "mcp.server.mcpserver.server", "cryptography")


def _run(probe: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _loaded(names: tuple[str, ...]) -> str:
    return f"print(json.dumps([m for m in {names!r} if m in sys.modules]))"


def test_importing_the_command_line_loads_neither_docker_nor_jwt_nor_the_stemmer_nor_jsonschema_rs() -> None:
    assert json.loads(_run(f"import json, sys; import gateway.cli.main; {_loaded(LAZY)}")) == []


def test_importing_the_command_line_loads_neither_the_sdk_nor_an_http_stack() -> None:
    assert json.loads(_run(f"import json, sys; import gateway.cli.main; {_loaded(SERVING)}")) == []


def _check_loads(tmp_path: Path, names: tuple[str, ...]) -> list[str]:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"gateway": {"data_dir": str(tmp_path / "data")}, "servers": {}}))
    probe = (
        "import contextlib, json, sys; from gateway.cli import main as cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(sys.stderr):\n"
        f"    cli.main(['check', '--config', {str(config)!r}])\n"
        f"{_loaded(names)}"
    )
    loaded: list[str] = json.loads(_run(probe))
    return loaded


def test_check_loads_no_http_front_door_and_no_web_page(tmp_path: Path) -> None:
    assert _check_loads(tmp_path, FRONT_DOOR + LAZY) == []


def test_a_command_loads_neither_the_sdks_high_level_client_nor_its_server_framework(tmp_path: Path) -> None:
    assert _check_loads(tmp_path, SDK_UNUSED) == []


def test_the_sandbox_package_still_offers_its_names() -> None:
    probe = "import gateway.sandbox as s; print(s.DockerSandbox.__name__, s.sweep.__name__, s.SandboxLimits.__name__)"
    assert _run(probe).split() == ["DockerSandbox", "sweep", "SandboxLimits"]


def test_a_gateway_without_http_servers_loads_no_http_client(tmp_path: Path) -> None:
    assert _check_loads(tmp_path, ("httpx2", "mcp.client.streamable_http", "mcp.client.sse")) == []


def test_the_http_app_loads_the_web_page_at_its_first_request(tmp_path: Path) -> None:
    web_page = ("gateway.web.app", "gateway.web.pages", "jinja2", "markdown_it")
    probe = (
        "import json, sys\n"
        "import anyio, httpx2\n"
        "from gateway.config.loading import parse_config\n"
        "from gateway.frontdoors.httpapp import create_app\n"
        "from pathlib import Path\n"
        f"config = parse_config({{'gateway': {{'data_dir': {str(tmp_path)!r}}}}}, source='test', base_dir=Path('.'))\n"
        "app = create_app(config)\n"
        f"before = [m for m in {web_page!r} if m in sys.modules]\n"
        "async def visit():\n"
        "    transport = httpx2.ASGITransport(app=app)\n"
        "    async with httpx2.AsyncClient(transport=transport, base_url='http://127.0.0.1') as http:\n"
        "        return (await http.get('/')).status_code\n"
        "status = anyio.run(visit)\n"
        f"print(json.dumps([before, status, [m for m in {web_page!r} if m in sys.modules]]))"
    )
    assert json.loads(_run(probe)) == [[], 200, list(web_page)]


def test_a_call_without_a_tracing_section_loads_no_opentelemetry_sdk(tmp_path: Path) -> None:
    tracing = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "gateway.runtime.otel")
    probe = (
        "import json, sys\n"
        "import anyio\n"
        "from pathlib import Path\n"
        "from mcp import Client\n"
        "from gateway.frontdoors.mcpserver import build_server\n"
        "from gateway.service import Gateway\n"
        "from tests.support.harness import in_memory, make_config\n"
        "from tests.support.toy import build_server as toy\n"
        f"config = make_config(Path({str(tmp_path)!r}), {{'toy': {{'command': 'unused'}}}})\n"
        "async def call():\n"
        "    async with Gateway(config, transports=in_memory({'toy': toy()})) as gateway:\n"
        "        async with Client(build_server(gateway), mode='legacy') as client:\n"
        "            return (await client.call_tool('toy__echo', {'text': 'hi'})).is_error\n"
        "failed = anyio.run(call)\n"
        f"print(json.dumps([failed, [m for m in {tracing!r} if m in sys.modules]]))"
    )
    assert json.loads(_run(probe)) == [False, []]
