"""The stdio front door: one client that launched the gateway as a command, over stdin and stdout."""

from __future__ import annotations

import logging
import os
import signal
import sys
from functools import partial

import anyio
from mcp.server.stdio import stdio_server

from gateway.auth.identity import Identity
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.live.reload import reload_on_hangup
from gateway.runtime.heap import settle_heap
from gateway.runtime.redaction import configure_logging
from gateway.service import Gateway

log = logging.getLogger(__name__)


async def serve_stdio(config: GatewayConfig, identity: Identity, group: str | None = None) -> None:
    """Serve MCP over stdin/stdout as `identity` (on the endpoint of tool group `group`, if given)
    until the client closes them or sends SIGTERM, from the start (upstreams join as they connect);
    exit 1 with the reason when a required server does not connect.

    SIGTERM ends serving as closing stdin does: the gateway closes (its containers, workspaces and
    servers) and exits 0. A client stops a stdio server by closing its stdin, then SIGTERM, then
    SIGKILL a few seconds apart; the signal no longer cuts the closing short, and one during the
    closing is taken and ignored."""
    gateway = Gateway(config, local_identity=identity, local_group=group)
    # The gateway's redactor also learns the secrets of servers added while it runs.
    configure_logging(gateway.redact, logging.getLogger().level)
    server = build_server(gateway)
    settle_heap()
    failure: str | None = None
    terminated = False
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async with stdio_server() as (read, write):
            async with gateway.running(), anyio.create_task_group() as tasks:

                async def hold_required() -> None:
                    nonlocal failure
                    failure = await gateway.required_failure()
                    if failure is not None:
                        tasks.cancel_scope.cancel()

                async def end_on_terminate() -> None:
                    nonlocal terminated
                    async for _ in signals:
                        log.info("SIGTERM: closing the gateway")
                        terminated = True
                        tasks.cancel_scope.cancel()
                        return

                tasks.start_soon(hold_required)
                tasks.start_soon(end_on_terminate)
                tasks.start_soon(
                    gateway.background.keep,
                    "reload_signal",
                    partial(reload_on_hangup, gateway.reloader.reload_from_file),
                )
                await server.run(read, write, server.create_initialization_options())
                tasks.cancel_scope.cancel()
            # The gateway is closed. The SDK reads stdin in a thread that only the client's next
            # line or its EOF ends, and a client that launched the gateway may keep stdin open.
            if failure is not None:
                print(f"error: {failure}", file=sys.stderr, flush=True)
                os._exit(1)
            if terminated:
                sys.stderr.flush()
                os._exit(0)
