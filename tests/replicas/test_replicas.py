"""Two gateway processes sharing one Redis behind a real HAProxy: a client sees one gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.support.access import KEYS, http_client
from tests.support.harness import toy_stdio
from tests.support.replicas import Cluster, cluster, held_sessions, replica_config
from tests.support.skills import write_skill
from tests.support.waiting import Signal, poll_until

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"
# Bounds on waiting for what a loaded machine does slowly; never a claim about speed.
RECOVERY_LIMIT = 30.0


def _configs(tmp_path: Path, redis_url: str, count: int = 2) -> list[Path]:
    skills = tmp_path / "skills"
    write_skill(skills, "adding", "toy__add")
    roles: dict[str, Any] = {
        "admin": {"admin": True, "allow": ["*"]},
        "analyst": {"allow": ["toy__*"]},
        "intern": {"allow": ["toy__echo", "toy__add"], "budget": {"max_calls_per_session": 3}},
    }
    servers = {
        "toy": {**toy_stdio("toy"), "layer": "extended", "required": True, "tools": {"crash": {"enabled": False}}}
    }
    return [
        replica_config(
            tmp_path, f"r{n}", redis_url, servers=servers, roles=roles, gateway={"skill_dirs": [str(skills)]}
        )
        for n in range(count)
    ]


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_2026_client_s_loaded_skill_and_budget_hold_while_its_calls_alternate_between_replicas(
    tmp_path: Path, redis_url: str
) -> None:
    async with cluster(_configs(tmp_path, redis_url), tmp_path) as gateways:
        first, second = (r.url for r in gateways.replicas)
        async with (
            http_client(first, KEYS["intern"], mode=MODERN) as on_first,
            http_client(second, KEYS["intern"], mode=MODERN) as on_second,
        ):
            loaded = await on_first.call_tool("Load_Skill", {"name": "adding"})
            assert not loaded.is_error, _text(loaded)
            answers = [
                await client.call_tool("toy__add", {"a": n, "b": 1})
                for n, client in enumerate([on_second, on_first, on_second])
            ]
            assert [(a.is_error, _text(a)) for a in answers] == [(False, "1"), (False, "2"), (False, "3")]
            refused = await on_first.call_tool("toy__add", {"a": 9, "b": 1})
    assert refused.is_error and "used all 3 calls" in _text(refused)


async def test_a_handshake_era_session_stays_on_the_replica_the_load_balancer_hashed_it_to(
    tmp_path: Path, redis_url: str
) -> None:
    async with (
        cluster(_configs(tmp_path, redis_url), tmp_path) as gateways,
        http_client(gateways.url, KEYS["analyst"]) as client,
    ):
        answers = [_text(await client.call_tool("toy__echo", {"text": f"call {n}"})) for n in range(8)]
        holders = [len(await held_sessions(r.url)) for r in gateways.replicas]
    assert answers == [f"call {n}" for n in range(8)]
    assert sorted(holders) == [0, 1]


async def test_killing_a_replica_under_load_gives_stateless_clients_no_wrong_answer(
    tmp_path: Path, redis_url: str
) -> None:
    async with cluster(_configs(tmp_path, redis_url), tmp_path) as gateways:
        retried: list[str] = []
        answers: dict[str, str] = {}
        answered = Signal()

        async def caller(name: str) -> None:
            # A request cut off by the kill ends the client (its transport's task group); the retry is a new one.
            done = 0
            with anyio.fail_after(RECOVERY_LIMIT * 2):
                while done < 15:
                    try:
                        async with http_client(gateways.url, KEYS["analyst"], mode=MODERN) as client:
                            while done < 15:
                                text = f"{name} {done}"
                                answers[text] = _text(await client.call_tool("toy__echo", {"text": text}))
                                answered.notify()
                                done += 1
                    except Exception as error:
                        retried.append(f"{name} {done}: {error!r}")
                        await anyio.sleep(0.2)

        async with anyio.create_task_group() as group:
            for name in ("a", "b", "c"):
                group.start_soon(caller, name)
            await answered.until(lambda: len(answers) >= 10, "ten calls answered")
            gateways.replicas[0].kill()
    assert answers == {text: text for text in answers}
    assert len(answers) == 45, retried


async def test_handshake_clients_of_a_killed_replica_initialize_again_and_carry_on(
    tmp_path: Path, redis_url: str
) -> None:
    async with cluster(_configs(tmp_path, redis_url), tmp_path) as gateways:
        before, killed = None, False
        try:
            async with http_client(gateways.url, KEYS["analyst"]) as client:
                before = _text(await client.call_tool("toy__echo", {"text": "before"}))
                holder = await _holder(gateways)
                holder.kill()
                killed = True
                await client.call_tool("toy__echo", {"text": "lost"})
        except Exception:  # "session not found", a refused or dropped connection: in the call or as the client closes
            pass
        else:
            raise AssertionError("a call on the killed replica's session was answered")
        assert (before, killed) == ("before", True)
        answers: list[str] = []

        async def answered_again() -> bool:
            # Until HAProxy finds the killed replica gone, a new session may still be sent there.
            try:
                async with http_client(gateways.url, KEYS["analyst"]) as again:
                    answers.append(_text(await again.call_tool("toy__echo", {"text": "after"})))
            except Exception:
                return False
            return True

        await poll_until(answered_again, "a new session answered", RECOVERY_LIMIT)
    assert answers == ["after"]


async def _holder(gateways: Cluster) -> Any:
    for replica in gateways.replicas:
        if await held_sessions(replica.url):
            return replica
    raise AssertionError("no replica holds the session")
