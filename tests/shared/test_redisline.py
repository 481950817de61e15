"""The call's pipelined connection to a real Redis: answers to their callers, cancellations, a lost connection."""

from __future__ import annotations

import anyio
import pytest
import redis
from redis.exceptions import ConnectionError, ResponseError

from gateway.shared.redisline import RedisLine
from tests.support.harness import free_port

pytestmark = pytest.mark.anyio


async def test_commands_sent_at_once_each_get_their_own_answer(redis_url: str) -> None:
    line = RedisLine(redis_url)
    answers: dict[int, object] = {}

    async def ask(n: int) -> None:
        answers[n] = await line.call("ECHO", f"answer {n}")

    try:
        async with anyio.create_task_group() as group:
            for n in range(200):
                group.start_soon(ask, n)
    finally:
        await line.aclose()
    assert answers == {n: f"answer {n}" for n in range(200)}


async def test_an_error_answer_is_raised_to_its_own_caller_only(redis_url: str) -> None:
    line = RedisLine(redis_url)
    try:
        await line.call("SET", "text", "not a number")
        with pytest.raises(ResponseError):
            await line.call("INCR", "text")
        assert await line.call("INCR", "counter") == 1
    finally:
        await line.aclose()


async def test_a_caller_cancelled_while_it_waits_leaves_the_others_their_answers(redis_url: str) -> None:
    line = RedisLine(redis_url)
    other = redis.Redis.from_url(redis_url)
    answers: list[object] = []

    async def blocked(scope: anyio.CancelScope) -> None:
        with scope:
            await line.call("BLPOP", "queue", 0)

    async def behind() -> None:
        answers.append(await line.call("ECHO", "behind"))

    try:
        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(blocked, scope)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(behind)
            await anyio.wait_all_tasks_blocked()
            # The connection's reader, waiting for BLPOP's answer with ECHO's behind it, is cancelled.
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            other.rpush("queue", "item")
        assert answers == ["behind"]
        assert await line.call("ECHO", "after") == "after"
    finally:
        other.close()
        await line.aclose()


async def test_a_lost_connection_fails_the_commands_waiting_and_the_next_command_connects_again(
    redis_url: str,
) -> None:
    line = RedisLine(redis_url)
    other = redis.Redis.from_url(redis_url)
    failed: list[BaseException] = []

    async def blocked() -> None:
        try:
            await line.call("BLPOP", "queue", 0)
        except ConnectionError as error:
            failed.append(error)

    try:
        first = await line.call("CLIENT", "ID")
        async with anyio.create_task_group() as group:
            group.start_soon(blocked)
            await anyio.wait_all_tasks_blocked()
            other.client_kill_filter(_id=first)
        assert len(failed) == 1
        assert await line.call("CLIENT", "ID") != first
    finally:
        other.close()
        await line.aclose()


async def test_the_database_the_url_names_is_the_one_written(redis_url: str) -> None:
    url = f"{redis_url.rsplit('/', 1)[0]}/5"
    line = RedisLine(url)
    other = redis.Redis.from_url(url)
    try:
        other.delete("where")
        await line.call("SET", "where", "database 5")
        assert other.get("where") == b"database 5"
    finally:
        other.delete("where")
        other.close()
        await line.aclose()


async def test_an_unreachable_redis_is_a_connection_error() -> None:
    line = RedisLine(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ConnectionError):
        await line.call("PING")
    await line.aclose()
