"""Running the gateway: `serve` (streamable HTTP, with the banner and the web page) and `stdio`."""

from __future__ import annotations

import argparse
import logging
import shlex
import socket
import sys
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.runtime.datadir import make_private
from gateway.runtime.hostaccess import HOST_FILE, HostAccess
from gateway.runtime.redaction import configure_logging

if TYPE_CHECKING:
    from gateway.config.model import GatewayConfig


def serve(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Serve MCP over streamable HTTP, the web page and the admin API until stopped; the exit code."""
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


def stdio(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Serve one MCP client over stdin and stdout, as `--caller` with `--role`."""
    import anyio

    from gateway.auth.identity import Identity
    from gateway.frontdoors.stdio import serve_stdio

    settings = config.settings
    if args.group is not None and not group_known(config, args.group):
        return 2
    identity = Identity(args.caller or settings.stdio_caller, args.role or settings.stdio_role, "stdio")
    anyio.run(serve_stdio, config, identity, args.group, backend_options={"use_uvloop": True})
    return 0


def group_known(config: GatewayConfig, name: str) -> bool:
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
