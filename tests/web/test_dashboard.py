"""The dashboard over a generated audit of a known shape, on both store backends, through a real
gateway over real HTTP: an hour of steady calls with a burst of errors at minute 10 and the toy
server down from minute 30 to 35; the numbers behind each chart, what a role sees, the windows,
and the sparklines of the tool page and the servers page."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loading import parse_config
from gateway.pipeline import rollupwrites
from gateway.pipeline.approvals import Binding
from gateway.service import Gateway
from gateway.stores import Database
from tests.support.access import KEYS, auth_section, toy_entry
from tests.support.databases import Backend
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy
from tests.support.webclient import web_client

pytestmark = pytest.mark.anyio

T0 = 1_800_000_000
"""The generated hour starts here (a whole hour); the gateway's clock reads a second before its end."""
NOW = T0 + 3599
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["toy__add"]},
    "intern": {"allow": ["toy__echo"]},
}


def minute(index: int) -> str:
    """How the page writes the start of generated minute `index`."""
    return datetime.fromtimestamp(T0 + index * 60, UTC).strftime("%H:%M")


def generated_rows() -> Iterator[tuple[str, float, str, str, float, str]]:
    """Each minute: 10 calls of toy__echo (10 ms) and 5 of toy__add (20 ms), all ok; at minute 10,
    30 more of toy__add fail; from minute 30 to 34 toy__echo finds its server down."""
    count = 0
    for index in range(60):
        start = T0 + index * 60
        echo = "unavailable" if 30 <= index < 35 else "ok"
        calls = [("toy__echo", echo, 10.0)] * 10 + [("toy__add", "ok", 20.0)] * 5
        if index == 10:
            calls += [("toy__add", "error", 50.0)] * 30
        for offset, (tool, outcome, duration) in enumerate(calls):
            count += 1
            yield (f"gen-{count}", start + offset, tool, outcome, 0.0 if outcome == "unavailable" else duration, "")
    # A refused call of a tool the intern may not see.
    yield ("gen-refused", T0 + 5, "toy__fail", "refused:budget", 0.0, "")


def write_rows(db: Database, rows: list[tuple[str, float, str, str, float, str]]) -> None:
    """Audit rows given as (row id, epoch, tool, outcome, duration, detail), written as the gateway
    writes them: counted in the rollup."""
    audit = [
        (row_id, "t", epoch, "s", "alice", tool, "d", outcome, took, detail, "", "", "")
        for row_id, epoch, tool, outcome, took, detail in rows
    ]
    with db.transaction() as queries:
        rollupwrites.write(queries, db.dialect, audit)


def write_audit(gateway: Gateway) -> None:
    """The generated hour into the gateway's audit trail and its server events."""
    db = gateway.audit.database
    write_rows(db, list(generated_rows()))
    events = [(T0 - 100, "toy", "ready"), (T0 + 1800, "toy", "restart"), (T0 + 1800, "toy", "reconnecting")]
    events.append((T0 + 2100, "toy", "ready"))
    db.execute_many("INSERT INTO server_events (epoch, server, event, detail) VALUES (?, ?, ?, '')", events)


class Tables(HTMLParser):
    """The cells of each table with an id, row by row."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id")
            if self._table:
                self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rows_by_first(html: str, table: str) -> dict[str, list[str]]:
    """The body rows of `table` keyed by their first cell."""
    rows = Tables(html).tables[table][1:]
    return {row[0]: row[1:] for row in rows if row}


@asynccontextmanager
async def served(tmp_path: Path, backend: Backend) -> AsyncIterator[tuple[Gateway, str, list[float]]]:
    """A gateway on `backend` with the toy server and the generated audit; its wall clock, which the test may move."""
    data = {
        "gateway": {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05},
        "servers": {"toy": toy_entry()},
        "auth": auth_section(),
        "roles": ROLES,
        "groups": {"risky": {"allow": [{"risk": "high"}]}},
        "store": backend.config_section(),
    }
    config = parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    clock = [float(NOW)]
    async with http_gateway(config, transports=in_memory({"toy": toy("toy")}), wall_clock=lambda: clock[0]) as (
        gateway,
        url,
    ):
        write_audit(gateway)
        yield gateway, url, clock


async def test_the_dashboard_counts_each_minute_by_outcome_with_the_burst_and_the_outage(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    assert answer.status_code == 200
    calls = rows_by_first(answer.text, "calls-table")
    # From (UTC), then ok, tool error, refused, timeout, upstream down.
    assert len(calls) == 60
    assert calls[minute(0)] == ["15", "0", "1", "0", "0"]
    assert calls[minute(9)] == ["15", "0", "0", "0", "0"]
    assert calls[minute(10)] == ["15", "30", "0", "0", "0"]
    assert [calls[minute(index)] for index in range(30, 35)] == [["5", "0", "0", "0", "10"]] * 5
    assert calls[minute(35)] == ["15", "0", "0", "0", "0"]
    assert "931 calls: 850 ok, 30 tool errors, 1 refused, 0 timeouts, 50 upstream down." in answer.text
    assert f"Most not ok at {minute(10)}: 30 of 45." in answer.text


async def test_the_dashboard_reads_latency_per_minute_and_per_server_from_the_histograms(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    latency = rows_by_first(answer.text, "latency-table")
    # Ten calls in [10, 15) ms and five in [20, 30) ms: the p50 and p95 interpolated in their buckets.
    assert latency[minute(0)] == ["13.8 ms", "28.5 ms"]
    # The burst: 10 + 5 + 30 calls, the 30 errors in [50, 75) ms.
    assert latency[minute(10)] == ["56.2 ms", "73.1 ms"]
    # While the server was down only toy__add ran (refusals and outages are no latency).
    assert latency[minute(31)] == ["25.0 ms", "29.5 ms"]
    servers = rows_by_first(answer.text, "server-latency")
    assert servers["toy"][:2] == ["931", "81"]


async def test_the_top_tools_link_to_their_pages_with_sparklines_of_the_window(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    top = rows_by_first(answer.text, "top-calls")
    assert list(top) == ["toy__echo", "toy__add", "toy__fail"]
    assert top["toy__echo"][:2] == ["600", "50"] and top["toy__add"][:2] == ["330", "30"]
    errors = rows_by_first(answer.text, "top-errors")
    assert list(errors) == ["toy__echo", "toy__add", "toy__fail"]
    assert 'href="/tools/toy__add"' in answer.text
    assert 'aria-label="toy__add, per minute over the last hour: 330 calls, 30 not ok"' in answer.text
    assert 'aria-label="toy__fail, per minute over the last hour: 1 call, 1 not ok"' in answer.text


async def test_the_health_timeline_shows_the_outage_and_the_restart_mark(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    rows = Tables(answer.text).tables["health-table"][1:]
    toy_rows = [row[1:] for row in rows if row[0] == "toy"]
    assert toy_rows[:3] == [
        [minute(0), minute(30), "ready"],
        [minute(30), minute(35), "restarting"],
        [minute(35), minute(59), "ready"],
    ]
    assert [minute(30), "", "restart"] in toy_rows
    assert "toy: ready 54 min 59 s, not ready 5 min, 1 restart or change" in answer.text
    assert 'class="h-restarting"' in answer.text and 'class="mark-restart"' in answer.text


async def test_two_replicas_views_of_a_server_are_drawn_as_a_lane_each(tmp_path: Path, store_backend: Backend) -> None:
    async with served(tmp_path, store_backend) as (gateway, url, _), web_client(url) as page:
        # Another replica sharing the database saw the toy server fail at minute 10 and come back at 15.
        gateway.audit.database.execute_many(
            "INSERT INTO server_events (epoch, server, event, detail, replica) VALUES (?, 'toy', ?, '', 'r2')",
            [(T0 + 600, "failed"), (T0 + 900, "ready")],
        )
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    rows = Tables(answer.text).tables["health-table"][1:]
    assert [row[1:] for row in rows if row[0] == "toy on r2"] == [
        [minute(10), minute(15), "failed"],
        [minute(15), minute(59), "ready"],
    ]
    # The events written before replicas were named are the other view.
    assert [minute(30), "", "restart"] in [row[1:] for row in rows if row[0] == "toy on an unnamed replica"]
    assert "toy on r2: ready 44 min 59 s, not ready 5 min;" in answer.text


async def test_approvals_waiting_and_decided_are_counted_with_their_waiting_time(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (gateway, url, clock), web_client(url) as page:
        clock[0] = NOW - 600
        decided, _ = gateway.approvals.checkpoint(Binding("alice", "s1", "toy__add", "d1"), None, "{}", 3600)
        clock[0] = NOW - 480
        gateway.approvals.decide(decided.id, True, "admin")
        clock[0] = NOW - 300
        gateway.approvals.checkpoint(Binding("alice", "s1", "toy__add", "d2"), None, "{}", 3600)
        clock[0] = NOW
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    text = " ".join(answer.text.split())
    assert "1 waiting (the oldest for 5 min); 1 decided (1 approved), after a median wait of 2 min" in text


async def test_a_role_sees_only_the_tools_and_servers_it_may_and_an_unknown_filter_is_a_404(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["intern"])
        answer = await page.get("/dashboard?window=1h")
        hidden = await page.get("/dashboard?tool=toy__add")
    top = rows_by_first(answer.text, "top-calls")
    assert list(top) == ["toy__echo"]
    assert "600 calls: 550 ok, 0 tool errors, 0 refused, 0 timeouts, 50 upstream down." in answer.text
    assert hidden.status_code == 404


async def test_a_filter_and_a_longer_window_narrow_and_widen_the_figures(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        one_tool = await page.get("/dashboard?window=24h&tool=toy__add")
        week = await page.get("/dashboard?window=7d&server=toy")
        panels = await page.get("/dashboard/panels?window=24h&tool=toy__add")
        risky = await page.get("/dashboard?window=1h&group=risky")
        unknown = await page.get("/dashboard?window=2y")
    assert "330 calls: 300 ok, 30 tool errors" in one_tool.text
    # Ten-minute points: minute 10's burst is in the second.
    calls = rows_by_first(one_tool.text, "calls-table")
    assert calls[minute(10)] == ["50", "30", "0", "0", "0"]
    assert "931 calls" in week.text and len(rows_by_first(week.text, "calls-table")) == 1
    # The group holds the high-risk tools: toy__fail (and toy__increment, never called).
    assert "1 call: 0 ok, 0 tool errors, 1 refused, 0 timeouts" in risky.text
    assert panels.status_code == 200 and "<html" not in panels.text and 'id="calls-table"' in panels.text
    assert unknown.status_code == 404


async def test_the_tool_page_and_each_server_row_carry_a_sparkline_of_the_last_24_hours(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (_, url, _), web_client(url) as page:
        await page.sign_in(KEYS["admin"])
        tool = await page.get("/tools/toy__add")
        rows = await page.get("/servers/rows")
    assert 'aria-label="toy__add, hourly over the last 24 hours: 330 calls, 30 not ok"' in tool.text
    assert 'aria-label="toy, hourly over the last 24 hours: 931 calls, 81 not ok"' in rows.text
    assert '<path class="spark-errors"' in tool.text


async def test_skills_loaded_searches_that_found_nothing_and_scripts_run_are_counted(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with served(tmp_path, store_backend) as (gateway, url, _), web_client(url) as page:
        meta = [("m-1", T0 + 60, "Load_Skill", "ok", 1.0, ""), ("m-2", T0 + 61, "Find_Tools", "ok", 1.0, "")]
        meta += [("m-3", T0 + 62, "Find_Tools", "ok", 1.0, "no match")]
        meta += [("m-4", T0 + 63, "Find_Tools", "ok", 1.0, "no match"), ("m-5", T0 + 64, "Run_Code", "ok", 1.0, "")]
        meta += [("m-6", T0 + 65, "Run_Code", "error", 1.0, "line 2: ZeroDivisionError")]
        write_rows(gateway.audit.database, meta)
        await page.sign_in(KEYS["admin"])
        answer = await page.get("/dashboard?window=1h")
    told = "1 skill loaded; 3 Find_Tools searches, 2 of which found nothing; 2 scripts run (Run_Code), 1 of which"
    assert told + " did not end ok." in answer.text
