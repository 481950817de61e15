"""One tool call of a session: its name resolved as the session may see it (unknown and
invisible alike, a tool of a server still connecting waited for), then run through the pipeline
(the meta-tools through their own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types

from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog
from gateway.catalog.naming import SEPARATOR, near_misses
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings
from gateway.errors import ServerNotConnectedError, ToolHeldError, UnknownToolError
from gateway.pipeline.audit import AuditEntry, AuditStore, arguments_digest
from gateway.pipeline.chain import Pipeline, ProgressFn, ToolCall
from gateway.pipeline.confirmation import strip_confirmation
from gateway.runtime import requestid
from gateway.serving.listing import Listing
from gateway.upstreams.connection import Upstream
from gateway.upstreams.listing import records_for


class Calls:
    """Resolves and runs the tool calls of every session.

    `held` gives the tool held from clients under a name (a changed definition awaiting review);
    `upstreams` the connection of each enabled server, as the live server set keeps them. The
    pipelines and the audit store come at `start`, once the stores are open.
    """

    _pipeline: Pipeline
    _meta_pipeline: Pipeline
    _audit: AuditStore

    def __init__(
        self,
        listing: Listing,
        catalog: Catalog,
        visibility: Visibility,
        held: Callable[[str], ToolRecord | None],
        upstreams: Mapping[str, Upstream],
        settings: GatewaySettings,
        wall_clock: Callable[[], float],
    ) -> None:
        self._listing = listing
        self._catalog = catalog
        self._visibility = visibility
        self._held = held
        self._upstreams = upstreams
        self._settings = settings
        self._wall_clock = wall_clock

    def start(self, pipeline: Pipeline, meta_pipeline: Pipeline, audit: AuditStore) -> None:
        """Run calls through `pipeline` (the meta-tools through `meta_pipeline`) and audit unknown names in `audit`."""
        self._pipeline, self._meta_pipeline, self._audit = pipeline, meta_pipeline, audit

    def resolve(self, session: SessionContext, name: str) -> ToolRecord:
        """The tool `name` as this session may see it; unknown and invisible tools are alike.

        The suggestions come from the visible tools alone, so a hidden tool's name gets the
        answer it would get if that tool did not exist.
        """
        tool = self._listing.meta.get(name) or self._catalog.tool(name)
        if tool is None or not self._visibility.may_see(session, tool):
            self._check_not_connected(session, name)
            held = self._held(name)
            if held is not None and self._visibility.may_see(session, held):
                raise ToolHeldError(name, held.source)
            visible = [record.name for record in self._visibility.tools(session)]
            raise UnknownToolError(name, near_misses(name, visible))
        return tool

    def _check_not_connected(self, session: SessionContext, name: str) -> None:
        """Raise `ServerNotConnectedError` when `name` could be a tool of a server that has listed
        nothing yet and that this session's role could see, judged by the configuration alone
        (its name, server, tags and configured risk). A server without a prefix could own any name.
        Any other name stays unknown."""
        listed = set(self._catalog.sources())
        for upstream in self._upstreams.values():
            namespace = upstream.config.prefix
            prefix = f"{namespace}{SEPARATOR}" if namespace else ""
            if upstream.name in listed or not name.startswith(prefix):
                continue
            expected = records_for(upstream.config, [{"name": name[len(prefix) :], "inputSchema": {"type": "object"}}])
            if any(self._visibility.may_see(session, record.renamed(name)) for record in expected):
                raise ServerNotConnectedError(name, upstream.name)

    async def _resolve_connecting(self, session: SessionContext, name: str) -> ToolRecord:
        """`resolve`, after waiting (at most `first_listing_wait` seconds) for the server of a tool
        that could be its own while its first attempt to connect is still running."""
        try:
            return self.resolve(session, name)
        except ServerNotConnectedError as error:
            upstream = self._upstreams.get(error.server)
            if upstream is None or upstream.first_attempt.is_set():
                raise
            with anyio.move_on_after(self._settings.first_listing_wait):
                await upstream.first_attempt.wait()
            return self.resolve(session, name)

    async def call_tool(
        self,
        session: SessionContext,
        name: str,
        arguments: Mapping[str, Any] | None,
        progress: ProgressFn | None = None,
        notes: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Resolve and run one call through the pipeline; only an unknown tool raises.

        `notes` carries what the front door knows about the client (how to ask its user for a
        confirmation). A `_confirmation` argument is taken out here, for direct calls and calls
        through Use_Tool alike: the model cannot confirm its own call.
        """
        plain = strip_confirmation(arguments or {})
        try:
            tool = await self._resolve_connecting(session, name)
        except UnknownToolError:
            await self._audit.record(
                AuditEntry(
                    epoch=self._wall_clock(),
                    session=session.id,
                    caller=session.caller,
                    tool=name,
                    args_digest=arguments_digest(plain),
                    outcome="unknown_tool",
                    duration_ms=0.0,
                    request_id=requestid.current() or "",
                )
            )
            raise
        call = ToolCall(session=session, tool=tool, arguments=plain, progress=progress, notes=dict(notes or {}))
        if tool.name in self._listing.meta:
            return await self._meta_pipeline.run(call)
        result = await self._pipeline.run(call)
        # Resource links name the upstream's own URIs; the client reads them back through the gateway.
        return self._catalog.exposed_links(tool.source, result)
