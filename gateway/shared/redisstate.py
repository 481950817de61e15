"""Shared state in Redis: each call's budget count, session-state read and loop-window entry in one
atomic script, the rest of the session state written behind the calls, changes announced over pub/sub.

Keys (all under `gw:`): `gw:b:s:<session>:total` and `:recent` (calls of one session, ever and in
the window), `gw:b:c:<caller>:recent` and `:running` (calls of one caller in the window, and
running now), `gw:s:<session>` (a session's state: one JSON text per state key, and `@at`, the
wall-clock time of the call that wrote it), `gw:l:<session>` and `gw:lb:<session>` (its loop
window: a list of attempts, oldest first, and the set of blocked fingerprints, edited in place by
the script, never replaced). Windows are sorted sets of call tickets scored by the
wall-clock time of the call, so every replica reads the same window; a running call's ticket
leaves when the call ends, or after `lease` seconds when its replica died holding it. Every key
expires on its own, so nothing needs sweeping. One Redis (or a Sentinel-managed primary) holds
them: the script touches keys of several names at once, which Redis Cluster would place on
different nodes. HTTP session ownership is `gateway.shared.redissessions`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit
from uuid import uuid4

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from gateway.auth.policy import Budget
from gateway.clients.session import state_key
from gateway.errors import StateUnavailableError
from gateway.pipeline import loops
from gateway.pipeline.budgets import WINDOW_SECONDS, Admission, BudgetCounter, BudgetExceededError, Charge, refusal
from gateway.runtime.background import Report
from gateway.shared.redisline import RedisLine
from gateway.shared.redissessions import RedisSessions
from gateway.shared.sessions import SessionDirectory
from gateway.shared.state import CHANGES, WRITES, Begun, ChangeHandler, Held, WindowEdits, replica_name

log = logging.getLogger(__name__)

CHANNEL = "gw:changes"
# How long `follow` waits before subscribing again after Redis went away.
RESUBSCRIBE_SECONDS = 1.0
# How long a call's changed session state may wait for another round trip to carry it.
WRITE_BEHIND_SECONDS = 0.005

# One script is every round trip the hot path makes. KEYS: session total, session window, caller
# window, caller running, then the session's state (its hash, its loop window's list, its blocked
# fingerprints' set), then the same three per state write carried along. ARGV: now, window cutoff,
# lease cutoff, max per session, per minute, caller per minute, concurrent (-1: no limit), ticket,
# session ttl, window ttl, lease ttl (the budget; ARGV[4] = '' when no budget is charged), the
# writes as JSON ([stamp, ttl, [field, value, ...], edits, cap] per write), the call's attempt to
# append to the loop window as JSON ([ttl, cap, entry], or ''), how many of the loop window's newest
# attempts to read, then the state fields to read. It
# applies the writes first (a snapshot older than the stored one is dropped; an equal one, a
# resend, rewrites the same; loop window edits always apply, each naming its attempt by id, so a
# resend changes nothing more), then checks and counts the call, then reads the state (the loop
# window's field built from its list and set) and appends the attempt after the read. A loop
# window entry is the compact JSON `[tool,fingerprint,outcome,"id"]`, found by its id's suffix,
# so that no edit decodes the window. Returns {limit, oldest score, value...}: an empty limit admits
# the call. Only a budget with a concurrency limit holds a slot among the running calls, so the
# others need no round trip to free one.
_BEGIN = """
local LOOPS = '__LOOPS__'
local TAIL = 4
-- The attempt an edit names is nearly always among the newest (a call's outcome, written behind
-- it), so the list's tail is read first and the whole list only when the tail lacks it. An index
-- from the tail is negative.
local function find(list, id)
  local suffix = ',"' .. id .. '"]'
  local tail = redis.call('LRANGE', list, -TAIL, -1)
  for i = #tail, 1, -1 do
    if string.sub(tail[i], -#suffix) == suffix then
      return i - #tail - 1
    end
  end
  for i, entry in ipairs(redis.call('LRANGE', list, 0, -1)) do
    if string.sub(entry, -#suffix) == suffix then
      return i - 1
    end
  end
end
local function edit(list, blocked, edits, cap)
  for _, change in ipairs(edits) do
    if change[1] == 'block' then
      redis.call('SADD', blocked, change[2])
    else
      local at = find(list, change[2])
      if change[1] == 'append' and not at then
        redis.call('RPUSH', list, change[3])
      elseif change[1] == 'settle' and at then
        redis.call('LSET', list, at, change[3])
      elseif change[1] == 'drop' and at then
        redis.call('LSET', list, at, '')
        redis.call('LREM', list, 1, '')
      end
    end
  end
  redis.call('LTRIM', list, -cap, -1)
end
-- Every key of a session lives `ttl` seconds after its last call, whatever that call changed. Each
-- key is given its expiry once, when the script ends (a key kept twice, by a write carried along
-- and by the call's own attempt, takes the later ttl), and a blocked set the read found empty,
-- which does not exist, none.
local expiring, order, absent = {}, {}, {}
local function keep(first, ttl)
  for k = first, first + 2 do
    if not expiring[KEYS[k]] then
      table.insert(order, KEYS[k])
    end
    expiring[KEYS[k]] = ttl
  end
end
local function expire()
  for _, key in ipairs(order) do
    if not absent[key] then
      redis.call('EXPIRE', key, expiring[key])
    end
  end
end
-- Only the newest `READ` attempts: the loop detector keeps no more.
local READ = tonumber(ARGV[14])
local function loop_text(list, blocked)
  local entries = redis.call('LRANGE', list, -READ, -1)
  local found = redis.call('SMEMBERS', blocked)
  if #found == 0 then
    absent[blocked] = true
  end
  if #entries == 0 and #found == 0 then
    return false
  end
  local keys = #found > 0 and ('"' .. table.concat(found, '","') .. '"') or ''
  return '{"window":[' .. table.concat(entries, ',') .. '],"blocked":[' .. keys .. ']}'
end
local writes = cjson.decode(ARGV[12])
for i, write in ipairs(writes) do
  local key = KEYS[5 + 3 * i]
  if #write[3] > 0 then
    local stored = tonumber(redis.call('HGET', key, '@at') or '-1')
    if tonumber(write[1]) >= stored then
      redis.call('HSET', key, '@at', write[1], unpack(write[3]))
    end
  end
  if #write[4] > 0 then
    edit(KEYS[6 + 3 * i], KEYS[7 + 3 * i], write[4], write[5])
  end
  keep(5 + 3 * i, write[2])
end
local function read()
  if #ARGV < 15 then
    return {}
  end
  local values = redis.call('HMGET', KEYS[5], unpack(ARGV, 15))
  for i = 15, #ARGV do
    if ARGV[i] == LOOPS then
      values[i - 14] = loop_text(KEYS[6], KEYS[7])
    end
  end
  if ARGV[13] ~= '' then
    local held = cjson.decode(ARGV[13])
    redis.call('RPUSH', KEYS[6], held[3])
    redis.call('LTRIM', KEYS[6], -held[2], -1)
    keep(5, held[1])
  end
  return values
end
local function answer(limit, oldest)
  local out = {limit, oldest}
  for _, value in ipairs(read()) do
    table.insert(out, value)
  end
  expire()
  return out
end
if ARGV[4] == '' then
  return answer('', '0')
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[3])
local per_session = tonumber(ARGV[4])
if per_session >= 0 and tonumber(redis.call('GET', KEYS[1]) or '0') >= per_session then
  return answer('max_calls_per_session', '0')
end
local windows = {
  {'calls_per_minute', KEYS[2], tonumber(ARGV[5])},
  {'caller_calls_per_minute', KEYS[3], tonumber(ARGV[6])},
}
for _, window in ipairs(windows) do
  if window[3] >= 0 and redis.call('ZCARD', window[2]) >= window[3] then
    local oldest = redis.call('ZRANGE', window[2], 0, 0, 'WITHSCORES')
    return answer(window[1], oldest[2])
  end
end
local concurrent = tonumber(ARGV[7])
if concurrent >= 0 and redis.call('ZCARD', KEYS[4]) >= concurrent then
  return answer('concurrent', '0')
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
return answer('', '0')
""".replace("__LOOPS__", loops.STATE_KEY)

# KEYS: session total, session window, caller window, caller running. ARGV: the ticket.
# A call admitted ahead (see `begin`) that a step refused before the budget step: uncounted.
_REFUND = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('DECR', KEYS[1])
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 0
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
    """The `BudgetCounter` replicas share: every check and count of a call in one script run, the
    same round trip that carries the replica's pending state writes."""

    def __init__(self, state: RedisState) -> None:
        self._state = state

    async def admit(self, session_id: str, caller: str, budget: Budget) -> str:
        """Admit one call or raise `BudgetExceededError`; the ticket names the call's concurrency slot
        (empty when the budget limits no concurrency)."""
        begun = await self._state.begin(session_id, (), Charge(session_id, caller, budget))
        assert begun.admission is not None
        return begun.admission.take()

    async def free(self, caller: str, ticket: str) -> None:
        """Give the call's concurrency slot back (an empty ticket holds none)."""
        if not ticket:
            return
        async with _reachable(self._state.url):
            await self._state.redis.zrem(f"gw:b:c:{state_key(caller)}:running", ticket)

    async def forget(self, session_id: str) -> None:
        """Nothing: the session may go on at another replica; its counts expire after its idle timeout."""


@dataclass(slots=True)
class _Write:
    """A session's state waiting to be written: its snapshot's texts (none when only the loop window
    changed), stamped with when the call ended, and the loop window's edits."""

    stamp: float
    values: dict[str, str]
    ttl: int
    edits: list[list[str | None]]
    cap: int

    def then(self, later: _Write) -> _Write:
        """This write followed by `later`: the later snapshot (if it has one), both edits in order."""
        snapshot = later if later.values else self
        return _Write(snapshot.stamp, snapshot.values, later.ttl, self.edits + later.edits, max(self.cap, later.cap))


class RedisState:
    """The `SharedState` of replicas: one Redis, reached at `url`.

    Each call makes one round trip on its path: `begin` runs one script that writes this replica's
    pending session states, counts the call against its budget, reads the session's state and
    appends the call's attempt to its loop window.
    State a call changed is written behind (`save`): carried by the next round trip this replica
    makes, or sent by `write_behind` `WRITE_BEHIND_SECONDS` after the call if none went meanwhile.
    """

    shared = True

    def __init__(
        self, url: str, *, clock: Callable[[], float] = time.time, session_ttl: float, lease: float, loop_window: int
    ) -> None:
        self.url = url
        self.redis = aioredis.Redis.from_url(url, decode_responses=True)
        self._clock = clock
        self._session_ttl = math.ceil(max(session_ttl, WINDOW_SECONDS))
        self._lease = lease
        # A read returns the loop window's newest attempts, as many as the detector keeps; the list
        # holds up to twice as many (refused calls' attempts stay until dropped).
        self._loop_window = loop_window
        # The script every call runs goes over a connection of its own, pipelined (`redisline`).
        self._line = RedisLine(url)
        self._begin_sha = hashlib.sha1(_BEGIN.encode()).hexdigest()
        self._refund = self.redis.register_script(_REFUND)
        self.budgets: BudgetCounter = RedisBudgets(self)
        # Writes not yet sent, and those sent whose answer has not come: a round trip carries every
        # pending one and the unanswered one of the session it reads, so that no read of this
        # replica can overtake a write it made (a resent write only rewrites the same).
        self._pending: dict[str, _Write] = {}
        self._sent: dict[str, _Write] = {}
        self._written = anyio.Event()
        # Each process's own announcements come back to it over the channel; this tells them apart.
        # It also names the replica among those holding HTTP sessions.
        self.replica = replica_name()
        self.sessions: SessionDirectory = RedisSessions(self.redis, _where(url), self.replica, clock)

    async def begin(
        self, session_id: str, keys: Sequence[str], charge: Charge | None, held: Held | None = None
    ) -> Begun:
        """Read a session's state (and count its call against `charge`'s budget, and append the
        attempt `held` to its loop window), in one round trip that also carries this replica's
        pending writes."""
        return await self._round_trip(session_id, keys, charge, self._take(session_id), held)

    async def _round_trip(
        self,
        session_id: str,
        keys: Sequence[str],
        charge: Charge | None,
        writes: dict[str, _Write],
        held: Held | None = None,
    ) -> Begun:
        ticket, now = uuid4().hex, self._clock()
        names = _budget_keys(session_id, charge.caller if charge is not None else "")
        args: list[str | int] = ["", "", "", "", "", "", "", "", "", "", ""]
        if charge is not None:
            budget = charge.budget
            args = [
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
        names += [*_state_names(session_id), *(name for written in writes for name in _state_names(written))]
        batch = []
        for write in writes.values():
            fields = [item for pair in write.values.items() for item in pair]
            batch.append([repr(write.stamp), write.ttl, fields, write.edits, write.cap])
        attempt = ""
        if held is not None:
            found = held.attempt
            attempt = json.dumps([self._session_ttl, held.cap, _entry(found.tool, found.fingerprint, None, found.id)])
        args += [json.dumps(batch), attempt, self._loop_window, *keys]
        try:
            async with _reachable(self.url):
                answer = await self._run_begin(names, args)
        except BaseException:
            self._restore(writes)
            raise
        self._done(writes)
        limit, oldest, *values = answer
        # decode_responses: Redis answers text.
        stored = {key: cast(str, value) for key, value in zip(keys, values, strict=True) if value is not None}
        if charge is None:
            return Begun(stored, None)
        return Begun(stored, Admission(charge, ticket, _refusal(charge.budget, limit, oldest, now)))

    async def _run_begin(self, keys: Sequence[str], args: Sequence[str | int]) -> list[Any]:
        """The begin script by its digest, or by its text when Redis does not hold it (it restarted)."""
        try:
            answer = await self._line.call("EVALSHA", self._begin_sha, len(keys), *keys, *args)
        except ResponseError as error:
            if not str(error).startswith("NOSCRIPT"):
                raise
            answer = await self._line.call("EVAL", _BEGIN, len(keys), *keys, *args)
        return cast(list[Any], answer)

    async def refund(self, admission: Admission) -> None:
        """Uncount a call admitted ahead that never reached the budget step."""
        names = _budget_keys(admission.charge.session_id, admission.charge.caller)
        async with _reachable(self.url):
            await self._refund(keys=names, args=[admission.ticket])

    def save(self, session_id: str, values: Mapping[str, str], ttl: float, edits: WindowEdits | None = None) -> None:
        """Queue a session's state to be written behind the call; a newer save of the session
        replaces its snapshot and adds its loop window's edits."""
        edited = edits if edits is not None else WindowEdits([], 0)
        changes = [_edit(change) for change in edited.edits]
        write = _Write(self._clock(), dict(values), math.ceil(ttl), changes, edited.cap)
        waiting = self._pending.get(session_id)
        self._pending[session_id] = waiting.then(write) if waiting is not None else write
        self._written.set()

    async def flush(self) -> None:
        """Write every pending state now, in one round trip, with those another round trip carries
        unanswered yet: when this returns, every save made before it is in Redis."""
        if self._pending or self._sent:
            await self._round_trip("", (), None, self._take(None))

    async def write_behind(self, report: Report) -> None:
        """Send pending writes that no call's round trip carried within `WRITE_BEHIND_SECONDS`; runs
        until cancelled. A write that fails stays pending and goes with the next round trip."""
        while True:
            await self._written.wait()
            self._written = anyio.Event()
            await anyio.sleep(WRITE_BEHIND_SECONDS)
            try:
                await self.flush()
                report(WRITES, None)
            except StateUnavailableError as error:
                log.warning("session state not written yet: %s; retrying", error.message)
                report(WRITES, error.message)
                await anyio.sleep(RESUBSCRIBE_SECONDS)
                self._written.set()

    def _take(self, session_id: str | None) -> dict[str, _Write]:
        """The pending writes, and the session's own sent one still unanswered (another round trip
        may carry it yet, and this one reads the session; None: every unanswered one). A pending
        write carries the edits of its session's unanswered one too: it replaces that one among
        those sent, so a failure of the earlier round trip loses no edit."""
        writes = {
            name: self._sent[name].then(write) if name in self._sent else write for name, write in self._pending.items()
        }
        unanswered = self._sent if session_id is None else {session_id: self._sent.get(session_id)}
        for name, write in unanswered.items():
            if write is not None and name not in writes:
                writes[name] = write
        self._sent.update(writes)
        self._pending.clear()
        return writes

    def _done(self, writes: Mapping[str, _Write]) -> None:
        for session_id, write in writes.items():
            if self._sent.get(session_id) is write:
                del self._sent[session_id]

    def _restore(self, writes: Mapping[str, _Write]) -> None:
        # A failed round trip's writes wait again, unless the session saved a newer state meanwhile.
        for session_id, write in writes.items():
            if self._sent.get(session_id) is write:
                del self._sent[session_id]
                later = self._pending.get(session_id)
                self._pending[session_id] = write.then(later) if later is not None else write

    async def announce(self) -> None:
        """Publish a change; the others re-read the registrations. The change is stored already, so
        an unreachable Redis is only logged: the others catch up when they subscribe again."""
        try:
            await self.redis.publish(CHANNEL, self.replica)
        except RedisError as error:
            log.warning("change not announced to the other replicas: %s unreachable (%s)", _where(self.url), error)

    async def follow(self, on_change: ChangeHandler, report: Report) -> None:
        """Listen on the change channel, subscribing again whenever Redis went away; after each
        subscription `on_change` runs once, catching up with what was announced before it (while
        Redis was away, or before this run of the loop began)."""
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    report(CHANGES, None)
                    await on_change()
                    async for message in pubsub.listen():
                        if message.get("type") == "message" and message.get("data") != self.replica:
                            await on_change()
            except RedisError as error:
                log.warning("change channel at %s lost (%s); subscribing again", _where(self.url), error)
                report(CHANGES, f"{_where(self.url)} unreachable ({type(error).__name__})")
                await anyio.sleep(RESUBSCRIBE_SECONDS)

    async def aclose(self) -> None:
        """Write what is pending, then close the connection pool; a stopping replica loses no write
        unless Redis is unreachable then."""
        try:
            await self.flush()
        except StateUnavailableError as error:
            log.warning("session states of %d sessions not written: %s", len(self._pending), error.message)
        await self._line.aclose()
        await self.redis.aclose()


def _budget_keys(session_id: str, caller: str) -> list[str]:
    session, owner = state_key(session_id), state_key(caller)
    return [f"gw:b:s:{session}:total", f"gw:b:s:{session}:recent", f"gw:b:c:{owner}:recent", f"gw:b:c:{owner}:running"]


def _state_names(session_id: str) -> list[str]:
    """A session's state hash, its loop window's list and its blocked fingerprints' set."""
    session = state_key(session_id)
    return [f"gw:s:{session}", f"gw:l:{session}", f"gw:lb:{session}"]


def _entry(tool: str | None, key: str | None, outcome: str | None, id: str | None) -> str:
    """A loop window entry as the script keeps it: compact JSON ending in its id."""
    return json.dumps([tool, key, outcome, id], separators=(",", ":"))


def _edit(change: Sequence[str | None]) -> list[str | None]:
    """An edit of `LoopDetector.changes` as the script applies it: an attempt as its entry."""
    kind, subject, *attempt = change
    if attempt:
        tool, key, outcome = attempt
        return [kind, subject, _entry(tool, key, outcome, subject)]
    return [kind, subject]


def _refusal(budget: Budget, limit: str, oldest: str, now: float) -> BudgetExceededError | None:
    """The refusal the script's answer names, or None when it admitted the call."""
    if not limit:
        return None
    caps = {
        "max_calls_per_session": budget.max_calls_per_session,
        "calls_per_minute": budget.calls_per_minute,
        "caller_calls_per_minute": budget.caller_calls_per_minute,
        "concurrent": budget.concurrent,
    }
    cap = caps[limit]
    assert cap is not None
    return refusal(limit, cap, max(1, math.ceil(float(oldest) + WINDOW_SECONDS - now)))
