"""Shared state in Redis: budgets counted by one atomic script, session state as expiring keys,
changes announced over pub/sub.

Keys (all under `gw:`): `gw:b:s:<session>:total` and `:recent` (calls of one session, ever and in
the window), `gw:b:c:<caller>:recent` and `:running` (calls of one caller in the window, and
running now), `gw:s:<session>:<state key>` (a session's state as JSON). Windows are sorted sets
of call tickets scored by the wall-clock time of the call, so every replica reads the same
window; a running call's ticket leaves when the call ends, or after `lease` seconds when its
replica died holding it. Every key expires on its own, so nothing needs sweeping. One Redis
(or a Sentinel-managed primary) holds them: the budget script touches keys of two names at
once, which Redis Cluster would place on different nodes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import cast
from urllib.parse import urlsplit
from uuid import uuid4

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gateway.auth.policy import Budget
from gateway.errors import StateUnavailableError
from gateway.pipeline.budgets import WINDOW_SECONDS, BudgetCounter, refusal
from gateway.session import state_key
from gateway.shared.state import ChangeHandler

log = logging.getLogger(__name__)

CHANNEL = "gw:changes"
# How long `follow` waits before subscribing again after Redis went away.
RESUBSCRIBE_SECONDS = 1.0

# KEYS: session total, session window, caller window, caller running.
# ARGV: now, window cutoff, lease cutoff, max per session, per minute, caller per minute,
# concurrent (-1: no limit), ticket, session ttl, window ttl, lease ttl.
# Returns {limit, oldest score}: an empty limit admits the call. Only a budget with a concurrency
# limit holds a slot among the running calls, so the others need no round trip to free one.
_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[3])
local per_session = tonumber(ARGV[4])
if per_session >= 0 and tonumber(redis.call('GET', KEYS[1]) or '0') >= per_session then
  return {'max_calls_per_session', '0'}
end
local windows = {
  {'calls_per_minute', KEYS[2], tonumber(ARGV[5])},
  {'caller_calls_per_minute', KEYS[3], tonumber(ARGV[6])},
}
for _, window in ipairs(windows) do
  if window[3] >= 0 and redis.call('ZCARD', window[2]) >= window[3] then
    local oldest = redis.call('ZRANGE', window[2], 0, 0, 'WITHSCORES')
    return {window[1], oldest[2]}
  end
end
local concurrent = tonumber(ARGV[7])
if concurrent >= 0 and redis.call('ZCARD', KEYS[4]) >= concurrent then
  return {'concurrent', '0'}
end
redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[8])
redis.call('EXPIRE', KEYS[1], ARGV[9])
redis.call('EXPIRE', KEYS[2], ARGV[10])
redis.call('EXPIRE', KEYS[3], ARGV[10])
if concurrent >= 0 then
  redis.call('ZADD', KEYS[4], ARGV[1], ARGV[8])
  redis.call('EXPIRE', KEYS[4], ARGV[11])
end
return {'', '0'}
"""


@asynccontextmanager
async def _reachable(url: str) -> AsyncIterator[None]:
    """Redis's errors as the gateway's: a call meeting an unreachable Redis fails with a clear result."""
    try:
        yield
    except RedisError as error:
        what = type(error).__name__
        raise StateUnavailableError(f"The shared state at {_where(url)} is unreachable ({what})") from None


def _where(url: str) -> str:
    # Only host and port (or socket path): the URL may carry a password.
    parts = urlsplit(url)
    return f"redis {parts.path}" if parts.scheme == "unix" else f"redis {parts.hostname}:{parts.port or 6379}"


def _limit(value: int | None) -> int:
    return -1 if value is None else value


class RedisBudgets:
    """The `BudgetCounter` replicas share: every check and count of a call in one script run."""

    def __init__(
        self, client: aioredis.Redis, url: str, clock: Callable[[], float], session_ttl: float, lease: float
    ) -> None:
        self._redis = client
        self._url = url
        self._clock = clock
        self._session_ttl = math.ceil(max(session_ttl, WINDOW_SECONDS))
        self._lease = lease
        self._admit = client.register_script(_ADMIT)

    async def admit(self, session_id: str, caller: str, budget: Budget) -> str:
        """Admit one call or raise `BudgetExceededError`; the ticket names the call's concurrency slot
        (empty when the budget limits no concurrency)."""
        now = self._clock()
        ticket = uuid4().hex
        keys = [
            f"gw:b:s:{state_key(session_id)}:total",
            f"gw:b:s:{state_key(session_id)}:recent",
            f"gw:b:c:{state_key(caller)}:recent",
            f"gw:b:c:{state_key(caller)}:running",
        ]
        args: list[str | int] = [
            repr(now),
            repr(now - WINDOW_SECONDS),
            repr(now - self._lease),
            _limit(budget.max_calls_per_session),
            _limit(budget.calls_per_minute),
            _limit(budget.caller_calls_per_minute),
            _limit(budget.concurrent),
            ticket,
            self._session_ttl,
            math.ceil(WINDOW_SECONDS),
            math.ceil(self._lease),
        ]
        async with _reachable(self._url):
            limit, oldest = await self._admit(keys=keys, args=args)
        if not limit:
            return ticket if budget.concurrent is not None else ""
        caps = {
            "max_calls_per_session": budget.max_calls_per_session,
            "calls_per_minute": budget.calls_per_minute,
            "caller_calls_per_minute": budget.caller_calls_per_minute,
            "concurrent": budget.concurrent,
        }
        cap = caps[limit]
        assert cap is not None
        wait = max(1, math.ceil(float(oldest) + WINDOW_SECONDS - now))
        raise refusal(limit, cap, wait)

    async def free(self, caller: str, ticket: str) -> None:
        """Give the call's concurrency slot back (an empty ticket holds none)."""
        if not ticket:
            return
        async with _reachable(self._url):
            await self._redis.zrem(f"gw:b:c:{state_key(caller)}:running", ticket)

    async def forget(self, session_id: str) -> None:
        """Nothing: the session may go on at another replica; its counts expire after its idle timeout."""


class RedisState:
    """The `SharedState` of replicas: one Redis, reached at `url`."""

    shared = True

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time, session_ttl: float, lease: float) -> None:
        self._url = url
        self._redis = aioredis.Redis.from_url(url, decode_responses=True)
        self._session_ttl = session_ttl
        self.budgets: BudgetCounter = RedisBudgets(self._redis, url, clock, session_ttl, lease)
        # Each process's own announcements come back to it over the channel; this tells them apart.
        self._origin = uuid4().hex

    async def load(self, session_id: str, keys: Sequence[str]) -> dict[str, str]:
        """The stored texts of `keys`, in one round trip."""
        names = [self._key(session_id, key) for key in keys]
        async with _reachable(self._url):
            values = await self._redis.mget(names)
        # decode_responses: Redis answers text.
        return {key: cast(str, value) for key, value in zip(keys, values, strict=True) if value is not None}

    async def save(self, session_id: str, values: Mapping[str, str], ttl: float) -> None:
        """Store every text with its expiry, in one round trip."""
        async with _reachable(self._url), self._redis.pipeline(transaction=False) as pipe:
            for key, value in values.items():
                pipe.set(self._key(session_id, key), value, ex=math.ceil(ttl))
            await pipe.execute()

    async def announce(self) -> None:
        """Publish a change; the others re-read the registrations. The change is stored already, so
        an unreachable Redis is only logged: the others catch up when they subscribe again."""
        try:
            await self._redis.publish(CHANNEL, self._origin)
        except RedisError as error:
            log.warning("change not announced to the other replicas: %s unreachable (%s)", _where(self._url), error)

    async def follow(self, on_change: ChangeHandler) -> None:
        """Listen on the change channel, subscribing again whenever Redis went away; after each
        (re)subscription `on_change` runs once, catching up with what was announced meanwhile."""
        first = True
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    if not first:
                        await on_change()
                    first = False
                    async for message in pubsub.listen():
                        if message.get("type") == "message" and message.get("data") != self._origin:
                            await on_change()
            except RedisError as error:
                log.warning("change channel at %s lost (%s); subscribing again", _where(self._url), error)
                await anyio.sleep(RESUBSCRIBE_SECONDS)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()

    @staticmethod
    def _key(session_id: str, key: str) -> str:
        return f"gw:s:{state_key(session_id, key)}"
