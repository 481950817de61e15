"""The command line: its arguments, and which command runs: `serve` and `stdio` (`gateway.cli.serving`),
`check`, `catalog`, `audit`, `approvals`, `workspaces` and `client-config` (`gateway.cli.inspection`),
`servers` and `changes`.

`servers`, `changes`, and `catalog` and `approvals` without `--config`, talk to a running gateway (`gateway.cli.admin`);
the others work on a configuration file and the data directory it names."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gateway.auth.apikeys import hash_key, key_problem
from gateway.cli import admin, inspection, serving
from gateway.config.clientfiles import CLIENTS
from gateway.errors import ConfigError
from gateway.runtime import lazysdk
from gateway.runtime.hostaccess import HOST_FILE, read_host_file
from gateway.runtime.logformat import LOG_FORMATS, formatter
from gateway.runtime.redaction import Redactor, configure_logging, quiet_clients
from gateway.sandbox.hardening import DEFAULT_IMAGE

if TYPE_CHECKING:
    from gateway.config.model import GatewayConfig

# Each command imports what it needs when it runs: `--help`, `hash-key` and the commands against a
# running gateway load neither the SDK nor the HTTP server, and `check` no HTTP server.

log = logging.getLogger("gateway")


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
    for name, help_text in inspection.CATALOG_FILTERS.items():
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
    how.add_argument("--url", help=f"the gateway's base URL (default {admin.DEFAULT_URL}; claude-desktop: stdio only)")
    how.add_argument("--stdio", action="store_true", help="launch the gateway as a command (claude-desktop's default)")
    client.add_argument("--caller", help="stdio: who the client is (default gateway.stdio_caller)")
    client.add_argument("--role", help="stdio: the role the client acts as (needed when the file has roles)")
    return parser


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
        "serve": serving.serve,
        "stdio": serving.stdio,
        "check": inspection.check,
        "catalog": inspection.catalog,
        "audit": inspection.audit,
        "approvals": inspection.approvals,
        "workspaces": inspection.workspaces,
        "client-config": inspection.client_config,
    }
    raise SystemExit(handlers[args.command](config, args))


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
