"""The dashboard: calls, errors, latency, server health and approvals over the last hour, 24 hours
or 7 days, of every tool or of one server, group or tool, drawn from the audit rollup
(`gateway.pipeline.rollup`) and the server events (`gateway.stores.serverevents`).

Admins see every tool and server; anyone else the tools and servers their role may see, and their
own approvals. `/dashboard/panels` is the same page's charts alone, which its script fetches again
every few seconds while the tab is shown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.servers import visible_statuses
from gateway.catalog.tools import RUN_CODE, ToolRecord
from gateway.pipeline.approvals import may_see
from gateway.pipeline.rollup import CLASSES, OK, TIMEOUT, TOOL_ERROR, ClosedBuckets, Rollup, Totals
from gateway.skills.metatools import FIND_TOOLS, LOAD_SKILL
from gateway.web import charts, figures
from gateway.web.pages import PageError, Person, Web
from gateway.web.sparks import drawn

TOP = 8
"""Tools listed in each of the top tables."""
OTHER = "(no longer served)"
"""The server shown for tools the catalog does not hold now."""
PLURALS = {TOOL_ERROR: "tool errors", TIMEOUT: "timeouts"}
"""The classes of outcome that are nouns, as more than one is counted; the others read alike."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What a dashboard shows: its window, the filter chosen, the tools it counts (None: every
    row of the audit), the servers whose health it draws, and each tool's server."""

    window: figures.Window
    filter: tuple[str, str] | None
    tools: set[str] | None
    servers: list[str]
    server_of: Callable[[str], str]


def routes(web: Web) -> list[Route]:
    """`/dashboard` and its live panels."""
    gateway = web.gateway
    closed = ClosedBuckets()

    def scope(request: Request, person: Person) -> Scope:
        params = request.query_params
        window = figures.WINDOWS.get(params.get("window", "1h"))
        if window is None:
            raise PageError(404, f"No such window: {params.get('window')!r}; choose 1h, 24h or 7d")
        caller = person.caller
        catalog: list[ToolRecord] = (
            list(gateway.catalog.tools) if caller.admin else gateway.visibility.tools(caller.session())
        )
        sources = {tool.name: tool.source for tool in catalog}
        servers = [status.name for status in visible_statuses(gateway.servers, gateway.visibility, caller)]
        tools: set[str] | None = None if caller.admin else set(sources)
        chosen = next(((key, params[key]) for key in ("tool", "server", "group") if params.get(key)), None)
        if chosen is not None:
            key, value = chosen
            if key == "tool":
                tools = {value} if value in sources else set()
            elif key == "server":
                tools = {name for name, source in sources.items() if source == value}
                servers = [name for name in servers if name == value]
            else:
                group_tools = gateway.groups.tools(value, caller.identity.role)
                tools = {tool.name for tool in group_tools if tool.name in sources}
            if not tools and key != "server":
                raise PageError(404, f"No {key} {value!r} you may see has tools")
            if key != "server":
                servers = sorted({sources[name] for name in tools} & set(servers))
        return Scope(window, chosen, tools, servers, lambda tool: sources.get(tool, OTHER))

    async def values(request: Request, person: Person) -> dict[str, Any]:
        shown = scope(request, person)
        window, now = shown.window, gateway.wall_now()
        axis = window.axis(now)
        start, end = axis[0], axis[-1] + window.step
        rollup = Rollup(gateway.audit.database)
        first, last, tools_shown = axis[0], axis[-1], shown.tools

        def read() -> tuple[list[Totals], list[Totals], list[Totals]]:
            # One worker thread for the reads: each a GROUP BY over the window's rollup rows, those of
            # its closed buckets read once (`ClosedBuckets`), those of its open bucket each time. The
            # totals of every tool hold the meta-tools' (which no catalog lists), so they are read
            # apart only for a filtered window.
            per_tool = closed.per_tool(rollup, window.step, first, last, tools_shown)
            meta = (
                per_tool
                if tools_shown is None
                else closed.per_tool(rollup, window.step, first, last, {LOAD_SKILL, FIND_TOOLS, RUN_CODE})
            )
            return closed.per_bucket(rollup, window.step, first, last, tools_shown), per_tool, meta

        per_bucket, per_tool, meta = await anyio.to_thread.run_sync(read)
        events = await anyio.to_thread.run_sync(gateway.server_events.between, start, now)
        asked = await anyio.to_thread.run_sync(gateway.approvals.since, start)
        caller = person.caller
        asked = [
            approval
            for approval in asked
            if may_see(caller.identity.key, caller.admin, approval)
            and (tools_shown is None or approval.tool in tools_shown)
        ]
        points = figures.points(per_bucket, axis)
        tools = figures.ranked(per_tool, lambda tool: tool)
        per_server = figures.ranked(per_tool, shown.server_of)
        top_calls, top_errors = tools[:TOP], figures.by_errors(tools)[:TOP]
        named = {item.name for item in [*top_calls, *top_errors]}
        series = await anyio.to_thread.run_sync(closed.series, rollup, window.step, first, last, named)
        lines = figures.sparklines(series, axis, lambda tool: tool)
        empty = figures.Spark((0,) * len(axis), (0,) * len(axis))
        health = figures.health(events, shown.servers, start, min(now, end))
        step_words = {60: "minute", 600: "10 minutes", 3600: "hour"}[window.step]
        over = f"per {step_words} over {window.label}"
        totals = {name: sum(point.counts[name] for point in points) for name in CLASSES}
        calls = sum(totals.values())
        busiest = max(points, key=lambda point: point.calls - point.counts[OK], default=None)
        return {
            "window": window,
            "windows": figures.WINDOWS.values(),
            "filter": shown.filter,
            "step_words": step_words,
            "points": points,
            "classes": CLASSES,
            "plurals": PLURALS,
            "totals": totals,
            "calls": calls,
            "busiest": busiest if busiest is not None and busiest.calls - busiest.counts[OK] else None,
            "calls_chart": charts.stacked(
                [point.counts for point in points],
                CLASSES,
                f"Calls per {step_words} over {window.label}, stacked by outcome: {calls} in all",
            ),
            "latency_chart": charts.lines(
                {"p50": [point.p50 for point in points], "p95": [point.p95 for point in points]},
                f"Latency p50 and p95 per {step_words} over {window.label}, in milliseconds",
            ),
            "per_server": per_server,
            "top_calls": top_calls,
            "top_errors": top_errors,
            "spark": lambda item: drawn(item.name, lines.get(item.name, empty), over),
            "health": health,
            "health_chart": charts.timeline(
                [
                    (
                        lane.name,
                        [(s.start, s.end, s.state) for s in lane.segments],
                        [(m.epoch, m.event) for m in lane.marks],
                    )
                    for lane in health
                ],
                start,
                min(now, end),
                f"Each server's state over {window.label}",
            ),
            "start": start,
            "approvals": figures.approvals(asked, now),
            "skills_loaded": sum(item.counts[OK] for item in meta if item.key == LOAD_SKILL),
            "searches": sum(item.counts[OK] for item in meta if item.key == FIND_TOOLS),
            "found_nothing": sum(item.no_match for item in meta if item.key == FIND_TOOLS),
            "scripts": sum(item.calls for item in meta if item.key == RUN_CODE),
            "scripts_failed": sum(item.not_ok for item in meta if item.key == RUN_CODE),
        }

    async def page(request: Request, person: Person) -> Response:
        return web.render(request, person, "dashboard.html", query=request.url.query, **await values(request, person))

    async def panels(request: Request, person: Person) -> Response:
        return web.render(request, person, "dashboard_panels.html", **await values(request, person))

    return [
        Route("/dashboard", web.page(page), methods=["GET"]),
        Route("/dashboard/panels", web.page(panels), methods=["GET"]),
    ]
