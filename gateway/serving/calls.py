"""One tool call of a session: its name resolved as the session may see it (unknown and
invisible alike, a tool of a server still connecting waited for), then run through the pipeline
(the meta-tools through their own)."""

from __future__ import annotations


class Calls:
    """Resolves and runs the tool calls of every session."""

    def resolve(self, session: SessionContext, name: str) -> ToolRecord:
        """The tool `name` as this session may see it; unknown and invisible tools are alike.

        The suggestions come from the visible tools alone, so a hidden tool's name gets the
        answer it would get if that tool did not exist.
        """
        tool = self._meta.get(name) or self.catalog.tool(name)
        if tool is None or not self.visibility.may_see(session, tool):
            self._check_not_connected(session, name)
            held = self.pins.held(name)
            if held is not None and self.visibility.may_see(session, held):
                raise ToolHeldError(name, held.source)
            visible = [record.name for record in self.visibility.tools(session)]
            raise UnknownToolError(name, near_misses(name, visible))
        return tool

    def _check_not_connected(self, session: SessionContext, name: str) -> None:
        """Raise `ServerNotConnectedError` when `name` could be a tool of a server that has listed
        nothing yet and that this session's role could see, judged by the configuration alone
        (its name, server, tags and configured risk). A server without a prefix could own any name.
        Any other name stays unknown."""
        listed = set(self.catalog.sources())
        for upstream in self.upstreams.values():
            namespace = upstream.config.prefix
            prefix = f"{namespace}{SEPARATOR}" if namespace else ""
            if upstream.name in listed or not name.startswith(prefix):
                continue
            expected = records_for(upstream.config, [{"name": name[len(prefix) :], "inputSchema": {"type": "object"}}])
            if any(self.visibility.may_see(session, record.renamed(name)) for record in expected):
                raise ServerNotConnectedError(name, upstream.name)

    async def _resolve_connecting(self, session: SessionContext, name: str) -> ToolRecord:
        """`resolve`, after waiting (at most `first_listing_wait` seconds) for the server of a tool
        that could be its own while its first attempt to connect is still running."""
        try:
            return self.resolve(session, name)
        except ServerNotConnectedError as error:
            upstream = self.upstreams.get(error.server)
            if upstream is None or upstream.first_attempt.is_set():
                raise
            with anyio.move_on_after(self.config.settings.first_listing_wait):
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
            await self.audit.record(
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
        if tool.name in self._meta:
            return await self._meta_pipeline.run(call)
        result = await self.pipeline.run(call)
        # Resource links name the upstream's own URIs; the client reads them back through the gateway.
        return self.catalog.exposed_links(tool.source, result)
