"""An oci package registered through the admin API of a real gateway, run by real Docker: a
definition that would undo the container's hardening is refused, and what runs is unprivileged."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import docker.errors
import httpx2
import pytest
from docker import DockerClient

from tests.api.conftest import ADMIN, api, api_config
from tests.sandbox.conftest import IMAGE
from tests.support.access import http_client
from tests.support.harness import approve, http_gateway, in_memory
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until, poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

# What the server in the container sees of itself: who it is, what it may do, what it can reach.
# The snippet runs as a child of the server with an environment of its own; the server's is its parent's.
PROBE = """
import json, os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
environ = open(f"/proc/{os.getppid()}/environ", "rb").read().decode().split("\\0")
def writes(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
def connects():
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=5).close()
        return True
    except OSError:
        return False
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "capabilities": [status[key].strip() for key in ("CapEff", "CapPrm", "CapBnd")],
    "no_new_privileges": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "environ": [line for line in environ if line.split("=")[0] in ("MARK", "GREETING")],
    "root_writable": writes("/owned"), "host_mounted": os.path.exists("/host"), "connects": connects(),
}))
"""


def named(name: str, value: str | None = None) -> dict[str, Any]:
    """A named runtime argument."""
    return {"type": "named", "name": name} | ({} if value is None else {"value": value})


def server_json(name: str, runtime: list[dict[str, Any]], arguments: list[str]) -> dict[str, Any]:
    """A registry server.json with one oci package: the sandbox image, its runtime and package arguments."""
    package = {
        "registryType": "oci",
        "identifier": IMAGE,
        "transport": {"type": "stdio"},
        "runtimeArguments": runtime,
        "packageArguments": [{"type": "positional", "value": word} for word in arguments],
        "environmentVariables": [{"name": "GREETING", "value": "hello"}],
    }
    return {"name": f"io.github.example/{name}", "version": "1.0.0", "packages": [package]}


async def post(url: str, body: Any, method: str = "POST", path: str = "/api/v1/servers") -> httpx2.Response:
    """One admin request over real HTTP."""
    async with api(url, ADMIN) as http:
        return await http.request(method, path, json=body)


def marked(client: DockerClient, mark: str) -> list[str]:
    """The containers, running or not, whose environment holds `MARK=<mark>`."""
    found = []
    for entry in client.api.containers(all=True, filters={"ancestor": IMAGE}):
        try:
            environment = client.api.inspect_container(entry["Id"])["Config"]["Env"] or []
        except docker.errors.NotFound:
            continue  # removed between the listing and the inspection
        if f"MARK={mark}" in environment:
            found.append(str(entry["Id"]))
    return found


def transports() -> dict[str, Any]:
    """The two toy servers of the API tests' configuration, reached in memory."""
    return in_memory({"toy": toy("toy"), "other": toy("other")})


async def test_a_server_json_whose_runtime_arguments_would_make_its_container_root_on_the_host_is_refused(
    tmp_path: Path, docker_client: DockerClient
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    host.chmod(0o777)
    # The payload that wrote a root-owned file on the host: root, a host directory, a shell for entry point.
    hostile = [named("--user", "0:0"), named("-v", f"{host}:/host"), named("--entrypoint", "sh")]
    body = server_json("hostile", hostile, ["-c", "id -u > /host/uid"])
    config = api_config(tmp_path, registration={"allow_commands": ["docker"]})
    async with http_gateway(config, transports=transports()) as (gateway, url):
        refused = await post(url, body)
        stored = gateway.registrations.entries("server")
        servers = [status.name for status in gateway.servers.statuses()]
    assert refused.status_code == 422, refused.text
    problems = {problem["path"]: problem["problem"] for problem in refused.json()["problems"]}
    assert list(problems) == [f"packages[0].runtimeArguments[{index}]" for index in range(3)]
    for index, flag in enumerate(["--user", "-v", "--entrypoint"]):
        assert problems[f"packages[0].runtimeArguments[{index}]"].startswith(f"{flag!r} is not allowed")
    assert stored == {} and "hostile" not in servers
    assert list(host.iterdir()) == []


async def test_an_oci_package_runs_unprivileged_without_network_or_host_files_and_a_patch_cannot_change_that(
    tmp_path: Path, docker_client: DockerClient
) -> None:
    mark = uuid.uuid4().hex
    body = server_json("contained", [named("-e", f"MARK={mark}")], ["python3", "-m", "servers.python"])
    config = api_config(tmp_path, registration={"allow_commands": ["docker"]})
    # A container whose Python starts slowly on a loaded machine connects at its first attempt.
    config = replace(config, settings=replace(config.settings, upstream_connect_timeout=60))
    async with http_gateway(config, transports=transports()) as (gateway, url):
        added = await post(url, body)
        async with http_client(url, ADMIN, elicitation_callback=approve) as client:
            # Listed once its container has started, in about a second on a quiet machine.
            await catalog_until(
                gateway, lambda: gateway.catalog.tool("contained__run_python") is not None, "its tool", limit=120
            )
            assert "contained__run_python" in {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("contained__run_python", {"code": PROBE})
        stored = gateway.registrations.entries("server")["contained"]
        hostile_args = [*stored["args"][:1], "--user=0:0", *stored["args"][1:]]
        patched = await post(url, {"args": hostile_args}, "PATCH", "/api/v1/servers/contained")
        disabled = await post(url, {"enabled": False}, "PATCH", "/api/v1/servers/contained")
        after = gateway.registrations.entries("server")["contained"]
    assert added.status_code == 201, added.text
    assert Path(stored["command"]).name == "docker" and "sandbox" not in stored
    assert not result.is_error and result.structured_content is not None, result.content
    seen = json.loads(result.structured_content["stdout"])
    assert seen["uid"] == seen["gid"] == 65534 and 0 not in seen["groups"]
    assert seen["capabilities"] == ["0000000000000000"] * 3
    assert seen["no_new_privileges"] == "1" and seen["seccomp"] == "2"
    assert sorted(seen["environ"]) == ["GREETING=hello", f"MARK={mark}"]
    assert not seen["root_writable"] and not seen["host_mounted"] and not seen["connects"]
    assert patched.status_code == 422, patched.text
    assert patched.json()["problems"][0]["path"] == "servers.contained.args[1]"
    assert disabled.status_code == 200 and "sandbox" not in after and after["args"] == stored["args"]
    # The container ends with its server, which Docker announces to no one waiting here.
    await poll_until(lambda: anyio.to_thread.run_sync(lambda: not marked(docker_client, mark)), "the container to end")
