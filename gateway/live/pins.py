"""Pinned tool definitions in the running gateway: each server's listing judged against its pins
before it reaches the catalog, changes audited, counted and logged, and decisions applied live.

A tool whose change is held (`hold`, or any rejected definition) is left out of the listing the
catalog gets: clients stop seeing it, so none reads text nobody reviewed nor calls an
implementation that no longer matches what it was told; a call by its name is refused as a
protocol error saying the tool is held (to a caller who may see it; others are answered as for
any unknown tool). The last listing of each server is kept as the server sent it, so that a
decision applies at once: accepting pins the new definition and publishes the listing again,
which tells clients their list changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import anyio

from gateway.catalog.merged import SourceListing, wanted_tool_name
from gateway.catalog.pinning import Decision, Listed, OnToolChange, Plan, definition, fingerprint
from gateway.catalog.tools import ToolRecord
from gateway.pipeline.audit import AuditEntry, AuditStore
from gateway.runtime.metrics import Metrics
from gateway.stores.pins import Change, Event, PinStore

log = logging.getLogger(__name__)

OUTCOME = "tool_change:"
"""The audit outcome of a change and of a decision: `tool_change:held`, `tool_change:accepted`, ..."""
Publish = Callable[[SourceListing], Awaitable[None]]
Withdraw = Callable[[str], Awaitable[None]]
Announce = Callable[[], Awaitable[None]]


class LivePins:
    """Listings judged against the pin store on their way to the catalog (`publish`), and servers
    that left taken out of it (`withdraw`).

    `policy_of` gives a server's `on_tool_change`; `audit` the audit store once the gateway runs;
    `wall_clock` stamps pins, changes and audit rows; `announce` tells the other replicas of a decision.
    """

    def __init__(
        self,
        policy_of: Callable[[str], OnToolChange],
        publish: Publish,
        withdraw: Withdraw,
        audit: Callable[[], AuditStore],
        metrics: Metrics,
        wall_clock: Callable[[], float],
        announce: Announce,
    ) -> None:
        self._policy_of = policy_of
        self._publish = publish
        self._withdraw = withdraw
        self._announce = announce
        self._audit = audit
        self._metrics = metrics
        self._wall_clock = wall_clock
        self._store: PinStore | None = None
        self._listings: dict[str, SourceListing] = {}
        self._held: dict[str, dict[str, ToolRecord]] = {}
        """Each server's held tools by the name the catalog would give them."""
        # One listing or decision applied at a time: the catalog gets the listing the store judged last.
        self._lock = anyio.Lock()

    def start(self, store: PinStore) -> None:
        """Judge listings against `store` from now on."""
        self._store = store

    @property
    def store(self) -> PinStore:
        """The pin store (once started)."""
        assert self._store is not None
        return self._store

    async def listed(self, listing: SourceListing) -> None:
        """A server listed its tools: judge them, keep what is decided, publish what may be served.

        A store that cannot be read or written fails the listing (`DatabaseError`): the server's
        connection keeps its last published listing, or, for its first, does not become ready.
        """
        async with self._lock:
            self._listings[listing.source] = listing
            await self._apply(listing)

    async def removed(self, source: str) -> None:
        """The server left: nothing of it is published again, and it leaves the catalog."""
        self._listings.pop(source, None)
        self._held.pop(source, None)
        await self._withdraw(source)

    def held(self, name: str) -> ToolRecord | None:
        """The held tool that would be listed as `name`, under that name; None when no tool of that name is held."""
        for tools in self._held.values():
            record = tools.get(name)
            if record is not None:
                return record
        return None

    async def decide(self, change_id: str, accept: bool, decided_by: str) -> Change:
        """Accept (re-pin; clients get the new definition) or reject (it stays hidden) a pending change
        (`ChangeNotFoundError`, `ChangeClosedError`), audit it, publish its server's last listing again
        as the new pins say, and announce it to the other replicas."""
        now = self._wall_clock()
        change = await anyio.to_thread.run_sync(self.store.decide, change_id, accept, decided_by, now)
        decision = Decision.ACCEPTED if accept else Decision.REJECTED
        self._metrics.tool_change(change.server, decision)
        await self._audit().record(
            AuditEntry(
                epoch=now,
                session="",
                caller=decided_by,
                tool=f"{change.server}/{change.tool}",
                args_digest=change.new_fingerprint,
                outcome=OUTCOME + decision.value,
                duration_ms=0.0,
                detail=f"change {change.id} {decision.value} by {decided_by}",
            )
        )
        log.info(
            "change %s of tool %r on server %r %s by %s", change.id, change.tool, change.server, decision, decided_by
        )
        await self.follow_store(change.server)
        await self._announce()
        return change

    async def follow_store(self, server: str | None = None) -> None:
        """Publish the last listing of `server` (every server when None) again, judged as the store says now."""
        async with self._lock:
            names = [server] if server is not None else list(self._listings)
            for name in names:
                listing = self._listings.get(name)
                if listing is not None:
                    await self._apply(listing)

    async def _apply(self, listing: SourceListing) -> None:
        server = listing.source
        now = self._wall_clock()
        # In a worker thread with the store's work: fingerprinting 2,000 tools takes tens of milliseconds.
        policy = self._policy_of(server)
        plan, events = await anyio.to_thread.run_sync(self._judge, server, listing.tools, policy, now)
        for event in events:
            await self._report(event, now)
        if plan.first_seen and len(plan.first_seen) < len(listing.tools):
            # First sight is trusted: a tool a known server adds is pinned as it comes (docs/security.md).
            log.info(
                "server %r added tools, pinned as first seen: %s", server, ", ".join(i.tool for i in plan.first_seen)
            )
        tools = tuple(record for record in listing.tools if record.original_name not in plan.hidden)
        held = (record for record in listing.tools if record.original_name in plan.hidden)
        named = ((wanted_tool_name(listing, record.original_name)[0], record) for record in held)
        self._held[server] = {name: record.renamed(name) for name, record in named}
        await self._publish(listing if len(tools) == len(listing.tools) else replace(listing, tools=tools))

    def _judge(
        self, server: str, records: Sequence[ToolRecord], policy: OnToolChange, now: float
    ) -> tuple[Plan, list[Event]]:
        listed = []
        for record in records:
            pinned = definition(record)
            listed.append(Listed(record.original_name, pinned, fingerprint(pinned)))
        return self.store.observe(server, listed, policy, now)

    async def _report(self, event: Event, now: float) -> None:
        self._metrics.tool_change(event.server, event.decision)
        what = ", ".join(event.fields)
        if event.decision == Decision.ALLOWED:
            detail = f"{what} changed; pinned at once (on_tool_change: allow)"
            log.info("server %r changed tool %r (%s): pinned at once", event.server, event.tool, what)
        elif event.decision == Decision.HELD:
            detail = f"{what} changed; held until change {event.change} is accepted"
            log.warning("server %r changed tool %r: %s", event.server, event.tool, detail)
        else:
            detail = f"{what} changed; served while change {event.change} awaits review"
            log.warning("server %r changed tool %r: %s", event.server, event.tool, detail)
        await self._audit().record(
            AuditEntry(
                epoch=now,
                session="",
                caller="",
                tool=f"{event.server}/{event.tool}",
                args_digest=event.new_fingerprint,
                outcome=OUTCOME + event.decision.value,
                duration_ms=0.0,
                detail=f"{detail} ({event.old_fingerprint[:12]} -> {event.new_fingerprint[:12]})",
            )
        )

    async def changes(self) -> list[Change]:
        """Every changed tool definition on record, newest first."""
        return await anyio.to_thread.run_sync(self.store.changes)
