"""The command line: `serve`, `stdio`, `check`, `catalog`, `servers`, `audit`, `approvals`, `changes`, `workspaces`
and `client-config`.

`servers`, `changes`, and `catalog` and `approvals` without `--config`, talk to a running gateway (`gateway.cli.admin`);
the others work on a configuration file and the data directory it names."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gateway.auth.apikeys import hash_key, key_problem
from gateway.cli import admin
from gateway.config.clientfiles import CLIENTS, gateway_snippet, stdio_command
from gateway.errors import ConfigError
from gateway.runtime import lazysdk
from gateway.runtime.datadir import make_private
from gateway.runtime.hostaccess import HOST_FILE, HostAccess, read_host_file
from gateway.runtime.logformat import LOG_FORMATS, formatter
from gateway.runtime.redaction import Redactor, configure_logging, quiet_clients
from gateway.sandbox.hardening import DEFAULT_IMAGE

if TYPE_CHECKING:
    from gateway.config.model import GatewayConfig
    from gateway.service import Gateway

# Each command imports what it needs when it runs: `--help`, `hash-key` and the commands against a
# running gateway load neither the SDK nor the HTTP server, and `check` no HTTP server.

log = logging.getLogger("gateway")
DEFAULT_URL = "http://127.0.0.1:8000"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-gateway", description="An MCP gateway and tool host.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text", help="text, or one JSON object a line (default text)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def with_config(name: str, help_text: str, config_help: str = _CONFIG_HELP) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--config", type=Path, help=config_help)
        return sub

    serve = with_config("serve", "serve MCP over streamable HTTP at /mcp")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    stdio = with_config("stdio", "serve MCP over stdin/stdout (for clients that launch a command)")
    stdio.add_argument("--caller", help="who the stdio client is (default: gateway.stdio_caller, 'local')")
    stdio.add_argument("--role", help="the stdio client's role (default: gateway.stdio_role)")
    stdio.add_argument("--group", help="serve only this tool group's tools (a group of the config or the API)")
    check = with_config("check", "validate the configuration, connect to each server and report")
    check.add_argument(
        "--token", help="also report the caller and role this API key or JWT gets, and why (- reads it from stdin)"
    )
    catalog = with_config(
        "catalog",
        "the running gateway's catalog (with --config: offline, from the file's servers)",
        "work offline on this configuration file's servers (default: ask the running gateway)",
    )
    catalog.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _remote(catalog)
    for name, help_text in _CATALOG_FILTERS.items():
        catalog.add_argument(f"--{name}", help=help_text)
    servers = commands.add_parser(
        "servers", help="list, add, remove, enable, disable or restart the running gateway's servers"
    )
    servers.add_argument("action", choices=["list", "add", "remove", "enable", "disable", "restart"])
    servers.add_argument("target", nargs="?", help="add: a JSON or YAML file (- for stdin); others: the server's name")
    servers.add_argument("--json", action="store_true", help="print JSON instead of a table")
    servers.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for a changed server to connect (0: do not wait)"
    )
    _remote(servers)
    sandbox = commands.add_parser("sandbox", help="manage the sandbox image: `sandbox build [--force] [--method M]`")
    sandbox.add_argument("action", choices=["build"])
    sandbox.add_argument("--force", action="store_true", help="rebuild even when the image is current")
    sandbox.add_argument("--method", choices=["auto", "dockerfile", "rootfs"], default="auto", help="default auto")
    sandbox.add_argument("--tag", default=DEFAULT_IMAGE, help=f"the image's tag (default {DEFAULT_IMAGE})")
    hash_key = commands.add_parser("hash-key", help="print the sha256 of an API key, for auth.api_keys[].key_sha256")
    hash_key.add_argument("key", nargs="?", help="the key (default: read from stdin without echo)")
    audit = with_config("audit", "print recent audit entries")
    audit.add_argument("--limit", type=int, default=20, help="how many entries (default 20)")
    audit.add_argument("--session", help="only this session's entries")
    audit.add_argument("--tool", help="only this tool's entries")
    approvals = with_config(
        "approvals",
        "list, approve or decline parked high-risk calls (with --config: offline, on its data_dir)",
        "work directly on this configuration file's data_dir (default: ask the running gateway; when none "
        "serves the default data directory, work on that directory directly)",
    )
    approvals.add_argument("action", choices=["list", "approve", "decline"])
    approvals.add_argument("id", nargs="?", help="the approval to approve or decline")
    approvals.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _remote(approvals)
    changes = commands.add_parser(
        "changes", help="list, accept or reject tool definitions a server changed after they were pinned"
    )
    changes.add_argument("action", choices=["list", "accept", "reject"])
    changes.add_argument("id", nargs="?", help="the change to accept or reject")
    changes.add_argument("--json", action="store_true", help="print JSON (with each change's definitions and diff)")
    _remote(changes)
    workspaces = with_config("workspaces", "list session workspaces, or purge those kept past their time")
    workspaces.add_argument("action", choices=["list", "purge"])
    client = with_config("client-config", "print a client configuration snippet for the gateway or one tool group")
    client.add_argument("--group", help="the tool group to connect to (default: the whole gateway)")
    client.add_argument("--client", choices=CLIENTS, default="claude-desktop", help="default claude-desktop")
    how = client.add_mutually_exclusive_group()
    how.add_argument("--url", help=f"the gateway's base URL (default {DEFAULT_URL}; claude-desktop: stdio only)")
    how.add_argument("--stdio", action="store_true", help="launch the gateway as a command (claude-desktop's default)")
    client.add_argument("--caller", help="stdio: who the client is (default gateway.stdio_caller)")
    client.add_argument("--role", help="stdio: the role the client acts as (needed when the file has roles)")
    return parser


_CATALOG_FILTERS = {
    "q": "only tools whose name, title or description holds this text",
    "server": "only this server's tools",
    "tag": "only tools with this tag",
    "risk": "only tools of this risk (low, medium, high)",
    "layer": "only tools of this layer (core, extended)",
    "group": "only this tool group's tools",
}
_REMOTE = {"servers", "catalog", "approvals", "changes"}
_CONFIG_HELP = "configuration file (default: the embedded defaults)"


def _remote(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--url",
        help=f"the running gateway (default: the one serving the default data directory, whose {HOST_FILE} "
        f"holds its URL and host token, else {admin.DEFAULT_URL}; a key in {admin.KEY_VARIABLE} goes first)",
    )


def _default_data_dir() -> Path | None:
    """The data directory of the embedded defaults (None when they do not load)."""
    try:
        return Path(_config(None).settings.data_dir)
    except ConfigError:
        return None


def _offline_approvals(args: argparse.Namespace) -> bool:
    """Whether `approvals` without `--config` works on the default data directory itself: nothing names
    a gateway to ask (no `--url`, no key) and none serves that directory (a stdio gateway, or none)."""
    if args.command != "approvals" or args.url is not None or os.environ.get(admin.KEY_VARIABLE):
        return False
    data_dir = _default_data_dir()
    return data_dir is not None and read_host_file(data_dir) is None


def _run_remote(args: argparse.Namespace) -> int:
    """A command against the running gateway: at `--url`, or the one serving the default data directory."""
    client = admin.client_from(args.url, _default_data_dir())
    try:
        if args.command == "servers":
            return admin.servers_command(client, args, sys.stdout, sys.stderr, sys.stdin)
        if args.command == "catalog":
            return admin.catalog_command(client, args, sys.stdout)
        if args.command == "changes":
            return admin.changes_command(client, args, sys.stdout)
        return admin.approvals_command(client, args, sys.stdout)
    except admin.RemoteError as error:
        print(f"error: {error.client_text()}", file=sys.stderr)
        return 1
    finally:
        client.close()


def _config(path: Path | None) -> GatewayConfig:
    from gateway.config.loading import default_config_path, load_config

    return load_config(path or default_config_path())


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `python -m gateway` and `mcp-gateway`."""
    # Before anything imports the SDK: its packages' re-exports would load what the gateway does not use.
    lazysdk.install()
    if argv is None:
        argv = sys.argv[1:]
    args = _parser().parse_args(argv)
    if args.command == "hash-key":
        raise SystemExit(print_key_hash(args.key, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(args.log_format))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    if args.command == "sandbox":
        from gateway.sandbox import image as sandbox_image  # docker-py: only for this command

        raise SystemExit(sandbox_image.build_command(args.tag, args.method, force=args.force))
    if args.command in _REMOTE and getattr(args, "config", None) is None and not _offline_approvals(args):
        # A line for each request would bury the command's answer (17 for one `servers add`).
        quiet_clients(logging.getLogger().level)
        raise SystemExit(_run_remote(args))
    try:
        config = _config(args.config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    from gateway.config.secrets import secrets_of

    configure_logging(Redactor(secrets_of(config)), logging.getLogger().level)
    for note in config.notes:
        log.warning("%s: %s", config.path, note)
    handlers = {
        "serve": _serve,
        "stdio": _stdio,
        "check": _check,
        "catalog": _catalog,
        "audit": _audit,
        "approvals": _approvals,
        "workspaces": _workspaces,
        "client-config": _client_config,
    }
    raise SystemExit(handlers[args.command](config, args))


def _serve(config: GatewayConfig, args: argparse.Namespace) -> int:
    import anyio
    import uvicorn

    from gateway.cli import banner
    from gateway.frontdoors.httpapp import create_app
    from gateway.live.reload import reload_on_hangup
    from gateway.runtime.heap import settle_heap
    from gateway.service import Gateway

    # Bound before anything starts: a port already taken stops here, with no server started for nothing.
    try:
        listener = _bind(args.host, args.port)
    except OSError as error:
        print(f"error: cannot listen on {args.host}:{args.port}: {error.strerror or error}", file=sys.stderr)
        return 1
    url = banner.base_url(args.host, listener.getsockname()[1])
    host_access = HostAccess(url)
    gateway = Gateway(config, host_access=host_access)
    # The gateway's redactor also learns the secrets of servers registered while it runs.
    configure_logging(gateway.redact, logging.getLogger().level)
    app = create_app(config, host=args.host, gateway=gateway)
    # log_config=None: uvicorn's loggers (the access log too) go through the root handlers and their redaction.
    # The access log is a line per request (about 0.15 ms of CPU per call): written at DEBUG only.
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level.lower(),
            lifespan="on",
            # Nothing is served over WebSocket: no protocol module loaded for it.
            ws="none",
            log_config=None,
            access_log=logging.getLogger().isEnabledFor(logging.DEBUG),
        )
    )

    async def run() -> str | None:
        failure: str | None = None
        async with anyio.create_task_group() as group:

            async def hold_required() -> None:
                nonlocal failure
                missing = await gateway.required_failure()
                if missing is not None:
                    failure = missing
                    server.should_exit = True

            async def hold_service() -> None:
                # uvicorn would go on answering without the service; a supervisor restarts a process that exits.
                nonlocal failure
                await gateway.ended.wait()
                failure = f"the gateway's service ended: {gateway.failure}"
                server.should_exit = True

            async def announce() -> None:
                # The socket is listening already: once the lifespan has started the gateway, it serves.
                await gateway.wait_started()
                print(banner.serving(url, gateway.servers.statuses()), flush=True)
                # Only on this terminal and in the data directory: the person at the host becomes an admin with it.
                print(
                    f"Admin sign-in for the web page, works once: {host_access.link()}\n"
                    f"Calls waiting for approval: `{shlex.quote(sys.executable)} -m gateway approvals list` "
                    "(it finds this gateway "
                    f"in {gateway.data_dir / HOST_FILE})",
                    flush=True,
                )
                await gateway.settled.wait()
                print(banner.settled(gateway.servers.statuses()), flush=True)

            group.start_soon(hold_required)
            group.start_soon(announce)
            group.start_soon(hold_service)
            group.start_soon(
                gateway.background.keep, "reload_signal", partial(reload_on_hangup, gateway.reloader.reload_from_file)
            )
            await server.serve(sockets=[listener])
            group.cancel_scope.cancel()
        return failure

    settle_heap()
    failure = None
    # uvicorn raises the signal it caught again once it has shut down.
    with suppress(KeyboardInterrupt):
        failure = anyio.run(run, backend_options={"use_uvloop": True})
    if failure is not None:
        # It does not serve without its required servers, nor without its service.
        print(f"error: {failure}", file=sys.stderr)
        return 1
    # uvicorn's own code for a server that could not start (a failed lifespan).
    return 0 if server.started else 3


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port`, as uvicorn would bind it (`OSError` when it cannot)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    return listener


def _stdio(config: GatewayConfig, args: argparse.Namespace) -> int:
    import anyio

    from gateway.auth.identity import Identity
    from gateway.frontdoors.stdio import serve_stdio

    settings = config.settings
    if args.group is not None and not _group_known(config, args.group):
        return 2
    identity = Identity(args.caller or settings.stdio_caller, args.role or settings.stdio_role, "stdio")
    anyio.run(serve_stdio, config, identity, args.group, backend_options={"use_uvloop": True})
    return 0


def _group_known(config: GatewayConfig, name: str) -> bool:
    """Whether `name` is a group of the config file or of the API (the registration store);
    if not, says so on stderr, naming the groups there are."""
    from gateway.stores import DatabaseError
    from gateway.stores.registrations import RegistrationStore

    data_dir = Path(config.settings.data_dir)
    make_private(data_dir)
    try:
        store = RegistrationStore.open(config.store, data_dir)
    except DatabaseError as error:
        print(f"error: cannot open the registrations: {error.message}", file=sys.stderr)
        return False
    try:
        names = [*config.groups, *(name for name in store.entries("group") if name not in config.groups)]
    finally:
        store.close()
    if name in names:
        return True
    known = f"the groups are: {', '.join(names)}" if names else "no groups are defined"
    print(f"error: no group {name!r} in {config.path}; {known}", file=sys.stderr)
    return False


def _client_config(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Print the snippet of a client's configuration file that connects it to the gateway or a group."""
    stdio = args.stdio or (args.client == "claude-desktop" and args.url is None)
    if args.client == "claude-desktop" and not stdio:
        print("error: Claude Desktop's file starts servers as commands; leave out --url", file=sys.stderr)
        return 2
    if stdio:
        if args.group is not None and not _group_known(config, args.group):
            return 2
        roles = config.policy.role_names()
        if roles is not None and args.role is None and config.settings.stdio_role is None:
            print(
                f"error: {config.path} has roles ({', '.join(sorted(roles))}); a stdio client without one "
                "sees only the meta-tools: give --role",
                file=sys.stderr,
            )
            return 2
        command = stdio_command(config.path if args.config is not None else None, args.caller, args.role)
        snippet = gateway_snippet(args.client, args.group, stdio_command=command)
    else:
        url = args.url or DEFAULT_URL
        snippet = gateway_snippet(args.client, args.group, base_url=url, authorized=config.auth.enabled)
    print(json.dumps(snippet, indent=2))
    return 0


def _check(config: GatewayConfig, args: argparse.Namespace) -> int:
    import anyio

    from gateway.cli.tokencheck import read_token, token_report
    from gateway.service import START_GRACE, Gateway
    from gateway.upstreams.connection import State
    from gateway.upstreams.workspaces import PRIVILEGED

    async def run() -> int:
        async with Gateway(config, serving=False) as gateway:
            failed = False
            waited = config.settings.upstream_connect_timeout + START_GRACE
            print(f"config: {config.path} (valid)")
            for note in config.notes:
                print(f"  note: {note}")
            for status in gateway.servers.statuses():
                if not status.enabled:
                    print(f"  [off] {status.name} ({status.transport}): disabled, not started")
                    continue
                mark = "ok" if status.state == State.READY else "FAIL"
                required = " required" if status.required else ""
                reason = status.error or ("" if status.state == State.READY else f"not connected after {waited:g} s")
                detail = f" - {reason}" if reason else ""
                print(f"  [{mark}] {status.name} ({status.transport}{required}): {status.tools} tools{detail}")
                failed = failed or (status.required and status.state != State.READY)
            for name, source in gateway.local_sources.items():
                print(f"  [ok] {name} (local): {len(source.records)} tools")
            for clash in gateway.catalog.clashes:
                print(f"  warning: {clash.describe()}")
            for left in gateway.catalog.withheld:
                print(f"  warning: {left.describe()}")
            if gateway.sandboxes.docker is not None:
                ready, reason = gateway.sandboxes.availability()
                sandboxed = sum(1 for tool in gateway.catalog.tools if tool.sandbox)
                unavailable = "" if ready else ", whose tools are unavailable"
                print(f"  [{'ok' if ready else 'FAIL'}] sandbox: {reason} ({sandboxed} sandboxed tools{unavailable})")
            workspaces = gateway.workspaces
            if workspaces.unlimited is None:
                limit, kept = _size(workspaces.size), f"{workspaces.retention:g} s"
                print(f"  [ok] workspaces: at most {limit} each, kept {kept} after their session ends")
            else:
                print(f"  warning: workspaces are not size-limited: {workspaces.unlimited}")
            for name in workspaces.privileged:
                print(f"  warning: server {name} {PRIVILEGED}")
            print(f"catalog: {len(gateway.catalog.tools)} tools")
            for row in _skill_rows(gateway):
                print(f"  [ok] skill {row['name']} ({row['lifecycle']}): {len(row['tools'])} tools")
            # A broken skill folder does not stop the gateway, but it is a fault the operator must see.
            for problem in gateway.skills.skills.problems:
                print(f"  [FAIL] skill {problem}")
            failed = failed or bool(gateway.skills.skills.problems)
            if config.settings.find_tools_model != "none":
                unloaded = await anyio.to_thread.run_sync(gateway.skills.check_semantic)
                model = config.settings.find_tools_model
                if unloaded is None:
                    print(f"  [ok] Find_Tools ranks by words and meaning ({model})")
                else:
                    print(f"  warning: Find_Tools ranks by word matching alone: {unloaded}")
            if args.token is not None:
                accepted, lines = await token_report(gateway.authenticator, read_token(args.token))
                print("\n".join(lines))
                failed = failed or not accepted
            return 1 if failed else 0

    return anyio.run(run)


def _skill_rows(gateway: Gateway) -> list[dict[str, Any]]:
    """Each loaded skill with its lifecycle and the catalog tools it brings."""
    return [
        {
            "name": skill.name,
            "lifecycle": skill.lifecycle,
            "roles": list(skill.roles),
            "tools": gateway.skills.members(skill.name),
            "description": skill.description,
        }
        for skill in (gateway.skills.skills.skills[name] for name in gateway.skills.names)
    ]


def _catalog(config: GatewayConfig, args: argparse.Namespace) -> int:
    import anyio

    from gateway.auth.policy import derive_risk
    from gateway.catalog.poisoning import visible
    from gateway.service import Gateway

    filters = [f"--{name}" for name in _CATALOG_FILTERS if getattr(args, name)]
    if filters:
        print(f"error: {', '.join(filters)} filter the running gateway's catalog: drop --config", file=sys.stderr)
        return 2

    async def run() -> dict[str, Any]:
        async with Gateway(config, serving=False) as gateway:
            tools = [
                {
                    "name": tool.name,
                    "source": tool.source,
                    "original_name": tool.original_name,
                    "layer": tool.layer,
                    "risk": derive_risk(tool).value,
                    "sandbox": tool.sandbox,
                    "available": not tool.sandbox or gateway.sandboxes.availability()[0],
                    "read_only": tool.read_only,
                    "description": tool.description,
                    "flags": [finding.as_json() for finding in gateway.flags.of(tool)],
                }
                for tool in gateway.catalog.tools
            ]
            problems = [
                {"path": str(problem.path), "reason": problem.reason} for problem in gateway.skills.skills.problems
            ]
            return {"tools": tools, "skills": _skill_rows(gateway), "skill_problems": problems}

    catalog = anyio.run(run)
    if args.json:
        print(json.dumps(catalog, indent=2))
        return 0
    rows = catalog["tools"]
    width = max((len(row["name"]) for row in rows), default=4)
    header = f"{'NAME':<{width}}  {'SOURCE':<10}  {'RISK':<6}  {'SANDBOX':<11}  {'LAYER':<8}  {'FLAGGED':<20}"
    print(f"{header}  DESCRIPTION")
    for row in rows:
        summary = visible("".join((row["description"] or "").strip().splitlines()[0:1])[:80])
        sandbox = row["sandbox"] or "-"
        flagged = ",".join(dict.fromkeys(flag["kind"] for flag in row["flags"])) or "-"
        print(
            f"{row['name']:<{width}}  {row['source']:<10}  {row['risk']:<6}  {sandbox:<11}  {row['layer']:<8}"
            f"  {flagged:<20}  {summary}"
        )
    for row in rows:
        for flag in row["flags"]:
            print(f"flagged: {row['name']}: {flag['reason']} in {flag['where']}: {flag['excerpt']}")
    for skill in catalog["skills"]:
        print(f"skill {skill['name']} ({skill['lifecycle']}): {' '.join(skill['tools']) or 'no tools'}")
    for problem in catalog["skill_problems"]:
        print(f"warning: skill not loaded: {problem['path']}: {problem['reason']}")
    return 0


def _audit(config: GatewayConfig, args: argparse.Namespace) -> int:
    import anyio

    from gateway.pipeline.audit import AuditError, AuditStore

    try:
        store = AuditStore.open(config.store, Path(config.settings.data_dir))
    except AuditError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1

    async def run() -> int:
        entries = await store.recent(args.limit, session=args.session, tool=args.tool)
        for entry in entries:
            print(
                f"{entry.time}  {entry.session[:16]:<16}  {entry.caller:<12}  {entry.tool:<32}  "
                f"{entry.outcome:<20}  {entry.duration_ms:8.1f} ms  {entry.request_id or '-':<32}  "
                f"{entry.parent_request_id or '-':<32}  {entry.detail[:60]}"
            )
        return 0

    try:
        return anyio.run(run)
    finally:
        store.close()


def _approvals(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Whoever can run this on the gateway's data directory is the person who approves."""
    import anyio

    from gateway.pipeline.approvals import (
        ApprovalClosedError,
        ApprovalNotFoundError,
        ApprovalStore,
        ApprovalStoreError,
        decision_entry,
    )
    from gateway.pipeline.audit import AuditStore
    from gateway.stores import DatabaseError

    data_dir = Path(config.settings.data_dir)
    make_private(data_dir)
    try:
        store = ApprovalStore.open(config.store, data_dir)
    except ApprovalStoreError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    try:
        if args.action == "list":
            print(f"{'ID':<15}  {'CALLER':<12}  {'TOOL':<32}  {'LEFT':>6}  ARGUMENTS")
            for approval in store.pending():
                left = max(0, round(approval.expires - store.clock()))
                print(
                    f"{approval.id}  {approval.caller:<12}  {approval.tool:<32}  {left:>5}s  {approval.arguments[:200]}"
                )
            return 0
        if args.id is None:
            print(f"error: approvals {args.action} needs the id of an approval", file=sys.stderr)
            return 2
        try:
            decided = store.decide(args.id, args.action == "approve", "cli")
        except (ApprovalNotFoundError, ApprovalClosedError) as error:
            print(f"error: {error.message}", file=sys.stderr)
            return 1
    except DatabaseError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    audit = AuditStore.open(config.store, data_dir)
    try:
        anyio.run(audit.record, decision_entry(decided))
    finally:
        audit.close()
    print(f"{decided.id} {decided.status.value}: {decided.tool} for {decided.caller}")
    return 0


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:g} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def _workspaces(config: GatewayConfig, args: argparse.Namespace) -> int:
    from gateway.upstreams.workspaces import Workspaces

    workspaces = Workspaces(Path(config.settings.data_dir) / "workspaces", config.settings, {})
    if args.action == "purge":
        removed = workspaces.sweep()
        print(f"removed {len(removed)} workspaces")
        return 0
    retention = config.settings.workspace_retention
    for workspace in workspaces.entries():
        if workspace.ended_at is None:
            state = "in use (or left by a gateway that stopped)"
        else:
            ended = datetime.fromtimestamp(workspace.ended_at, UTC).isoformat(timespec="seconds")
            purge = datetime.fromtimestamp(workspace.ended_at + retention, UTC).isoformat(timespec="seconds")
            state = f"ended {ended}, purged after {purge}"
        print(f"{workspace.path}  {_size(workspace.used):>10}  {state}")
    return 0


def print_key_hash(key: str | None, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """The `hash-key` command: print the key_sha256 of `key`, or of a key read from stdin; exit status."""
    if key is None:
        # Reading the key keeps it out of shell history and the process list.
        key = getpass.getpass("API key: ") if stdin.isatty() else stdin.readline()
        key = key.strip()
    problem = key_problem(key)
    if problem is not None:
        print(f"error: {problem}", file=stderr)
        return 2
    print(hash_key(key), file=stdout)
    return 0
