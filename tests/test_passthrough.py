"""Routing what upstreams send outside a request: log messages to the sessions that can see the
server (or the session whose own instance sent them), updates to the resource's subscribers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from gateway.clients.session import SessionContext
from gateway.pipeline.audit import AuditStore
from gateway.pipeline.budgets import Budgets
from gateway.serving.passthrough import PassThrough, Subscription
from gateway.stores import StoreSettings

pytestmark = pytest.mark.anyio


def session(name: str) -> SessionContext:
    return SessionContext(name, name, "http", created_at=0.0, last_seen=0.0)


def passthrough(
    tmp_path: Path, sessions: list[SessionContext], sees: dict[str, set[str]]
) -> tuple[PassThrough, list[Any]]:
    """A pass-through over `sessions`, each seeing the servers `sees` names, and what it delivered."""
    store = AuditStore.open(StoreSettings(), tmp_path)
    clock = lambda: 0.0  # noqa: E731
    route = PassThrough(
        Budgets(lambda role: None), lambda: store, lambda: sessions, lambda s: sees[s.id], {}, clock, clock
    )
    delivered: list[Any] = []

    async def deliver(to: SessionContext, notice: Any) -> None:
        delivered.append((to.id, notice))

    route.deliver = deliver
    return route, delivered


def log_line(text: str, level: types.LoggingLevel = "info") -> types.LoggingMessageNotification:
    return types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(level=level, data=text))


async def test_a_log_message_outside_a_request_reaches_the_sessions_that_can_see_its_server(tmp_path: Path) -> None:
    alice, bob = session("alice"), session("bob")
    route, delivered = passthrough(tmp_path, [alice, bob], {"alice": {"files"}, "bob": {"git"}})
    await route.notice("files", log_line("hello"), None)
    route.set_level(alice, "error")
    await route.notice("files", log_line("quiet"), None)
    await route.notice("files", log_line("own"), bob)
    assert [(to, notice.params.data) for to, notice in delivered] == [("alice", "hello"), ("bob", "own")]


async def test_an_update_reaches_only_subscribers_under_the_uri_they_know(tmp_path: Path) -> None:
    alice, bob = session("alice"), session("bob")
    route, delivered = passthrough(tmp_path, [alice, bob], {"alice": {"files"}, "bob": {"files"}})
    assert route.subscribe(Subscription(alice, "files+file:///a", "files", "file:///a"))
    update = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri="file:///a"))
    await route.notice("files", update, None)
    assert [(to, notice.params.uri) for to, notice in delivered] == [("alice", "files+file:///a")]
    assert route.unsubscribe(alice, "files", "file:///a")
