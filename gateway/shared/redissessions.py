"""The HTTP sessions of every replica in Redis, so that session limits hold across replicas.

Keys: `gw:o:replicas` (the set of replica ids), one hash per replica, `gw:o:r:<replica>`: session
id -> `[caller, last active, busy]` as JSON, and one index per caller, `gw:o:c:<caller>`: session
id -> replica (an entry whose replica no longer holds the session is dropped when met). A replica
rewrites its hash every `HEARTBEAT_SECONDS` (one pipelined round trip, whatever its number of
sessions), with an expiry of three heartbeats:
a replica that dies stops refreshing it and its sessions stop counting within
`3 * HEARTBEAT_SECONDS`; one that stops deletes it. A new session is decided and counted in one
script over every replica's hash: admitted, admitted in place of the caller's least recently
active idle session (removed at once, and its replica told on `gw:end:<replica>` to end it), or
refused. An operator ending another replica's session removes it from that replica's hash and
tells the replica on `gw:stop:<replica>`. No tool call touches these keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container, Mapping
from typing import cast

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.typing import EncodableT, FieldT

from gateway.clients.session import state_key
from gateway.errors import StateUnavailableError
from gateway.runtime.background import Report
from gateway.shared.sessions import Admission, EndSession, Held, RemoteSession, SessionLimits, refused

log = logging.getLogger(__name__)

REPLICAS = "gw:o:replicas"
HEARTBEATS = "session_heartbeats"
"""The name the heartbeats report under."""
ENDS = "session_ends"
"""The name the listener of session ends reports under."""
HEARTBEAT_SECONDS = 10.0
# How long `serve` waits before trying again after Redis went away.
RETRY_SECONDS = 1.0

# KEYS: the set of replicas, the caller's index. ARGV: this replica, the new session, its caller,
# now, the limit per caller, the total limit, the expiry of the keys, then the caller's sessions
# busy here (fresher than this replica's last heartbeat). Returns {evicted session, its replica or
# 'refused', the caller's sessions}; an empty first and second admit without eviction. It reads
# one count per replica and the caller's own sessions, never every session.
_OPEN = """
local me, caller = ARGV[1], ARGV[3]
local busy_here = {}
for i = 8, #ARGV do
  busy_here[ARGV[i]] = true
end
local total = 0
for _, replica in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local count = redis.call('HLEN', 'gw:o:r:' .. replica)
  if count == 0 and replica ~= me then
    redis.call('SREM', KEYS[1], replica)
  end
  total = total + count
end
local mine = {}
local index = redis.call('HGETALL', KEYS[2])
for i = 1, #index, 2 do
  local session, replica = index[i], index[i + 1]
  local entry = redis.call('HGET', 'gw:o:r:' .. replica, session)
  if not entry then
    redis.call('HDEL', KEYS[2], session)
  else
    local held = cjson.decode(entry)
    local busy = held[3] == 1
    if replica == me then
      busy = busy_here[session] == true
    end
    table.insert(mine, {session, replica, tonumber(held[2]), busy})
  end
end
local function register()
  local key = 'gw:o:r:' .. me
  redis.call('HSET', key, ARGV[2], cjson.encode({caller, tonumber(ARGV[4]), 0}))
  redis.call('EXPIRE', key, ARGV[7])
  redis.call('SADD', KEYS[1], me)
  redis.call('HSET', KEYS[2], ARGV[2], me)
  redis.call('EXPIRE', KEYS[2], ARGV[7])
end
if #mine < tonumber(ARGV[5]) and total < tonumber(ARGV[6]) then
  register()
  return {'', '', #mine}
end
table.sort(mine, function(a, b) return a[3] < b[3] end)
for _, held in ipairs(mine) do
  if not held[4] then
    redis.call('HDEL', 'gw:o:r:' .. held[2], held[1])
    redis.call('HDEL', KEYS[2], held[1])
    register()
    if held[2] ~= me then
      redis.call('PUBLISH', 'gw:end:' .. held[2], held[1])
    end
    return {held[1], held[2], #mine}
  end
end
return {'', 'refused', #mine}
"""

# KEYS: the set of replicas. ARGV: this replica. Returns {replica, session, entry, ...} of the others.
_ELSEWHERE = """
local found = {}
for _, replica in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if replica ~= ARGV[1] then
    local entries = redis.call('HGETALL', 'gw:o:r:' .. replica)
    for i = 1, #entries, 2 do
      table.insert(found, replica)
      table.insert(found, entries[i])
      table.insert(found, entries[i + 1])
    end
  end
end
return found
"""

# KEYS: the set of replicas. ARGV: this replica, the session. Removes the session from the other
# replica holding it and tells that replica to end it; returns 1, or 0 when no other replica holds it.
_END = """
for _, replica in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if replica ~= ARGV[1] and redis.call('HDEL', 'gw:o:r:' .. replica, ARGV[2]) == 1 then
    redis.call('PUBLISH', 'gw:stop:' .. replica, ARGV[2])
    return 1
  end
end
return 0
"""


class RedisSessions:
    """The `SessionDirectory` of replicas: every replica's HTTP sessions in one Redis."""

    def __init__(self, client: aioredis.Redis, where: str, replica: str, clock: Callable[[], float]) -> None:
        self._redis = client
        self._where = where
        self._replica = replica
        self._clock = clock
        self._key = f"gw:o:r:{replica}"
        self._ttl = int(3 * HEARTBEAT_SECONDS)
        self._open = client.register_script(_OPEN)
        self._elsewhere = client.register_script(_ELSEWHERE)
        self._end = client.register_script(_END)

    async def admit(
        self, caller: str, session_id: str, owners: Mapping[str, str], busy: Container[str], limits: SessionLimits
    ) -> Admission:
        """Decide over every replica's sessions, counting the new one when admitted."""
        busy_here = [session for session, owner in owners.items() if owner == caller and session in busy]
        args: list[str | int] = [self._replica, session_id, caller, repr(self._clock())]
        args += [limits.per_caller, limits.total, self._ttl, *busy_here]
        try:
            evicted, replica, mine = await self._open(keys=[REPLICAS, _index(caller)], args=args)
        except RedisError as error:
            what = type(error).__name__
            raise StateUnavailableError(f"The shared state at {self._where} is unreachable ({what})") from None
        if replica == "refused":
            return refused(int(mine) >= limits.per_caller, int(mine), limits)
        if not evicted:
            return Admission()
        return Admission(evict=cast(str, evicted), elsewhere=replica != self._replica)

    async def ended(self, session_id: str) -> None:
        """Stop counting the session; an unreachable Redis is only logged (the next heartbeat catches up)."""
        try:
            await self._redis.hdel(self._key, session_id)
        except RedisError as error:
            log.warning("ended session %s not removed from %s (%s)", session_id, self._where, error)

    async def serve(self, held: Held, end_idle: EndSession, end: EndSession, report: Report) -> None:
        """Heartbeats of this replica's sessions, and the ends other replicas ask for."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._heartbeats, held, report)
            await self._listen({f"gw:end:{self._replica}": end_idle, f"gw:stop:{self._replica}": end}, report)

    async def leave(self) -> None:
        """Remove this replica's sessions from the directory."""
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._key)
                pipe.srem(REPLICAS, self._replica)
                await pipe.execute()
        except RedisError as error:
            log.warning("sessions of this replica left in %s until they expire (%s)", self._where, error)

    async def end_elsewhere(self, session_id: str) -> bool:
        """Tell the replica holding `session_id` to end it, in one round trip."""
        try:
            return bool(await self._end(keys=[REPLICAS], args=[self._replica, session_id]))
        except RedisError as error:
            what = type(error).__name__
            raise StateUnavailableError(f"The shared state at {self._where} is unreachable ({what})") from None

    async def elsewhere(self) -> list[RemoteSession]:
        """The other replicas' sessions, in one round trip."""
        try:
            found = await self._elsewhere(keys=[REPLICAS], args=[self._replica])
        except RedisError as error:
            what = type(error).__name__
            raise StateUnavailableError(f"The shared state at {self._where} is unreachable ({what})") from None
        sessions = []
        for n in range(0, len(found), 3):
            caller, last_active, _ = json.loads(found[n + 2])
            sessions.append(RemoteSession(found[n + 1], caller, found[n], float(last_active)))
        return sessions

    async def _heartbeats(self, held: Held, report: Report) -> None:
        while True:
            sessions = held()
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.delete(self._key)
                    if sessions:
                        values: dict[FieldT, EncodableT] = {
                            s.id: json.dumps([s.caller, s.last_active, int(s.busy)]) for s in sessions
                        }
                        pipe.hset(self._key, mapping=values)
                        pipe.expire(self._key, self._ttl)
                    pipe.sadd(REPLICAS, self._replica)
                    await pipe.execute()
                report(HEARTBEATS, None)
            except RedisError as error:
                log.warning("sessions of this replica not refreshed in %s (%s)", self._where, error)
                report(HEARTBEATS, f"{self._where} unreachable ({type(error).__name__})")
            await anyio.sleep(HEARTBEAT_SECONDS)

    async def _listen(self, handlers: Mapping[str, EndSession], report: Report) -> None:
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(*handlers)
                    report(ENDS, None)
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            await handlers[str(message["channel"])](str(message["data"]))
            except RedisError as error:
                log.warning("session end channel at %s lost (%s); subscribing again", self._where, error)
                report(ENDS, f"{self._where} unreachable ({type(error).__name__})")
                await anyio.sleep(RETRY_SECONDS)


def _index(caller: str) -> str:
    """The key of a caller's sessions on every replica: session id -> the replica holding it."""
    return f"gw:o:c:{state_key(caller)}"
