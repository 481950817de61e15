"""The command line against a running gateway: `servers`, `catalog`, `approvals` and `changes` over the admin API.

Each command is one or a few requests to `/api/v1` (see docs/api.md) with the credential in
`GATEWAY_API_KEY`, or the host token of the gateway serving the default data directory
(`gateway.runtime.hostaccess`); the answers are printed as tables or, with `--json`, as they came. A command that
changes a server waits until the server has connected or failed, telling how it goes on stderr.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

import yaml

from gateway.catalog.poisoning import visible
from gateway.errors import GatewayError
from gateway.runtime.hostaccess import read_host_file

if TYPE_CHECKING:
    import httpx2

DEFAULT_URL = "http://127.0.0.1:8000"
KEY_VARIABLE = "GATEWAY_API_KEY"
API = "/api/v1"
# States a server leaves on its own; a command that changed a server waits while it is in one.
SETTLING = frozenset({"connecting", "reconnecting"})


class RemoteError(GatewayError):
    """The running gateway could not be reached, or refused or failed a request."""


class AdminClient:
    """A client of one gateway's admin API."""

    def __init__(self, url: str, api_key: str | None, transport: httpx2.BaseTransport | None = None) -> None:
        import httpx2  # 50 ms: loaded by the commands that talk to a gateway, not by the others nor `--help`

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self._http = httpx2.Client(base_url=self.url, headers=headers, timeout=30.0, transport=transport)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def request(self, method: str, path: str, body: Any = None, params: Mapping[str, str] | None = None) -> Any:
        """The JSON answer to one request (None for 204); raises `RemoteError` with the gateway's own words."""
        import httpx2

        try:
            response = self._http.request(method, API + path, json=body, params=params)
        except httpx2.TransportError as error:
            raise RemoteError(
                f"cannot reach the gateway at {self.url}: {error}",
                hint="Start it with `python -m gateway serve`, or pass --url.",
            ) from None
        if response.status_code == 204:
            return None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.is_success:
            return answer
        raise RemoteError(_refusal(response.status_code, answer))

    def servers(self) -> list[dict[str, Any]]:
        """Every server the caller may see."""
        servers: list[dict[str, Any]] = self.request("GET", "/servers")["servers"]
        return servers

    def server(self, name: str) -> dict[str, Any]:
        """One server's status."""
        server: dict[str, Any] = self.request("GET", f"/servers/{quote(name, safe='')}")["server"]
        return server

    def tools(self, filters: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        """Every tool matching `filters`, page after page."""
        params = dict(filters)
        while True:
            page = self.request("GET", "/tools", params=params)
            yield from page["tools"]
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]


def _refusal(status: int, answer: Any) -> str:
    """The gateway's reason for refusing a request, with each problem's path."""
    if status == 401:
        return f"the gateway wants a credential it accepts: set {KEY_VARIABLE} to an API key (HTTP 401)"
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return f"the gateway answered HTTP {status}"
    lines = [f"{answer['error']} (HTTP {status})"]
    for problem in answer.get("problems") or []:
        if isinstance(problem, dict):
            lines.append(f"  {problem.get('path') or '(body)'}: {problem.get('problem')}")
    return "\n".join(lines)


def client_from(url: str | None, data_dir: Path | None) -> AdminClient:
    """A client of the gateway at `url` with the key in `GATEWAY_API_KEY`. Without `url`, or when it
    names that gateway, the one that serves `data_dir` (its `HOST_FILE`): its URL, and its host token
    when no key is set; otherwise `DEFAULT_URL`."""
    key = os.environ.get(KEY_VARIABLE) or None
    found = None if data_dir is None else read_host_file(data_dir)
    # The host token goes only to the gateway that wrote it, never to another `--url`.
    if found is not None and (url is None or url.rstrip("/") == found[0]):
        return AdminClient(found[0], key or found[1])
    return AdminClient(url or DEFAULT_URL, key)


def read_entry_file(path: Path) -> Any:
    """A registration body from a JSON or YAML file (`-` is not a file: the caller reads stdin)."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as error:
        raise RemoteError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise RemoteError(f"{path}: not JSON or YAML: {error}") from None


def wait_settled(
    client: AdminClient,
    names: list[str],
    timeout: float,
    err: TextIO,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """Each server once it has left the connecting states, or as it stands after `timeout` seconds;
    the progress goes to `err` whenever a server's state changes."""
    start = clock()
    told: dict[str, str] = {}
    while True:
        servers = [client.server(name) for name in names]
        for server in servers:
            if told.get(server["name"]) != server["state"]:
                told[server["name"]] = server["state"]
                print(f"{server['name']}: {server['state']} ({clock() - start:.1f} s)", file=err, flush=True)
        if all(server["state"] not in SETTLING for server in servers) or clock() - start >= timeout:
            return servers
        sleep(0.25)


def print_servers(servers: list[dict[str, Any]], out: TextIO) -> None:
    """Servers as a table."""
    width = max((len(server["name"]) for server in servers), default=4)
    print(
        f"{'NAME':<{width}}  {'STATE':<12}  {'TRANSPORT':<9}  {'SOURCE':<6}  {'TOOLS':>5}  {'RESTARTS':>8}  ERROR",
        file=out,
    )
    for server in servers:
        print(
            f"{server['name']:<{width}}  {server['state']:<12}  {server['transport']:<9}  {server.get('source', ''):<6}"
            f"  {server.get('tools', 0):>5}  {server.get('restarts', 0):>8}  {server.get('error') or ''}",
            file=out,
        )


def print_tools(tools: list[dict[str, Any]], out: TextIO) -> None:
    """Tools as a table: name, server, risk, layer, what the tool was flagged for and the first line
    of the description, hidden characters written out so that none reaches the terminal."""
    width = max((len(tool["name"]) for tool in tools), default=4)
    print(f"{'NAME':<{width}}  {'SERVER':<12}  {'RISK':<6}  {'LAYER':<8}  {'FLAGGED':<20}  DESCRIPTION", file=out)
    for tool in tools:
        summary = visible("".join((tool.get("description") or "").strip().splitlines()[:1])[:80])
        flagged = ",".join(dict.fromkeys(flag["kind"] for flag in tool.get("flags") or [])) or "-"
        print(
            f"{tool['name']:<{width}}  {tool['server']:<12}  {tool.get('risk') or '':<6}  {tool['layer']:<8}"
            f"  {flagged:<20}  {summary}",
            file=out,
        )
    for tool in tools:
        for flag in tool.get("flags") or []:
            print(f"flagged: {tool['name']}: {flag['reason']} in {flag['where']}: {flag['excerpt']}", file=out)


def print_approvals(approvals: list[dict[str, Any]], out: TextIO, now: float) -> None:
    """Pending approvals as a table."""
    print(f"{'ID':<15}  {'CALLER':<12}  {'TOOL':<32}  {'LEFT':>6}  ARGUMENTS", file=out)
    for approval in approvals:
        left = max(0, round(float(approval.get("expires", now)) - now))
        arguments = str(approval.get("arguments", ""))[:200]
        print(f"{approval['id']}  {approval['caller']:<12}  {approval['tool']:<32}  {left:>5}s  {arguments}", file=out)


def print_changes(changes: list[dict[str, Any]], out: TextIO) -> None:
    """Changed tool definitions as a table, each pending one followed by its diff."""
    print(f"{'ID':<15}  {'STATUS':<10}  {'SERVER':<12}  {'TOOL':<24}  CHANGED", file=out)
    for change in changes:
        fields = ", ".join(change.get("fields") or [])
        print(
            f"{change['id']:<15}  {change['status']:<10}  {change['server']:<12}  {change['tool']:<24}  {fields}",
            file=out,
        )
        if change["status"] == "pending":
            for line in str(change.get("diff", "")).splitlines():
                print(f"    {line}", file=out)


def dump(value: Any, out: TextIO) -> None:
    """`value` as indented JSON."""
    print(json.dumps(value, indent=2), file=out)


def servers_command(client: AdminClient, args: Any, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    """`servers list | add FILE | remove NAME | enable NAME | disable NAME | restart NAME`."""
    action, target = args.action, args.target
    if action == "list":
        servers = client.servers()
        dump(servers, out) if args.json else print_servers(servers, out)
        return 0
    if target is None:
        raise RemoteError(f"servers {action} needs {'a file' if action == 'add' else 'the name of a server'}")
    named = f"/servers/{quote(target, safe='')}"
    if action == "remove":
        client.request("DELETE", named)
        print(f"{target} removed", file=out)
        return 0
    if action == "add":
        body = yaml.safe_load(stdin.read()) if target == "-" else read_entry_file(Path(target))
        changed = client.request("POST", "/servers", body)["servers"]
    elif action == "restart":
        changed = [client.request("POST", f"{named}/restart")["server"]]
    else:
        changed = [client.request("PATCH", named, {"enabled": action == "enable"})["server"]]
    names = [server["name"] for server in changed]
    settled = wait_settled(client, names, args.wait, err) if args.wait > 0 else changed
    dump(settled, out) if args.json else print_servers(settled, out)
    failed = [server for server in settled if server["state"] in SETTLING | {"failed", "unhealthy"}]
    return 1 if failed and args.wait > 0 else 0


def catalog_command(client: AdminClient, args: Any, out: TextIO) -> int:
    """`catalog [--q TEXT] [--server S] [--tag T] [--risk R] [--layer L] [--group G]` of the running gateway."""
    names = ("q", "server", "tag", "risk", "layer", "group")
    filters = {name: getattr(args, name) for name in names if getattr(args, name)}
    tools = list(client.tools(filters))
    dump({"tools": tools}, out) if args.json else print_tools(tools, out)
    return 0


def approvals_command(client: AdminClient, args: Any, out: TextIO) -> int:
    """`approvals list | approve ID | decline ID` on the running gateway."""
    if args.action == "list":
        approvals = client.request("GET", "/approvals")["approvals"]
        dump(approvals, out) if args.json else print_approvals(approvals, out, time.time())
        return 0
    if args.id is None:
        raise RemoteError(f"approvals {args.action} needs the id of an approval")
    decided = client.request("POST", f"/approvals/{quote(args.id, safe='')}/{args.action}", {})["approval"]
    print(f"{decided['id']} {decided['status']}: {decided['tool']} for {decided['caller']}", file=out)
    return 0


def changes_command(client: AdminClient, args: Any, out: TextIO) -> int:
    """`changes list | accept ID | reject ID` on the running gateway."""
    if args.action == "list":
        changes = client.request("GET", "/changes")["changes"]
        dump(changes, out) if args.json else print_changes(changes, out)
        return 0
    if args.id is None:
        raise RemoteError(f"changes {args.action} needs the id of a change")
    decided = client.request("POST", f"/changes/{quote(args.id, safe='')}/{args.action}", {})["change"]
    print(f"{decided['id']} {decided['status']}: {decided['tool']} on {decided['server']}", file=out)
    return 0
