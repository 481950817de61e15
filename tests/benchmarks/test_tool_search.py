"""Find_Tools ranks every benchmark query as recorded in benchmarks/data/rankings.json: a faster index
must not move a tool, and a ranking change shows here before it shows in the recall figures."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from benchmarks.tool_search import (
    RANKINGS,
    Ranker,
    benchmark_queries,
    new_ranker,
    ranking_digests,
    semantic_ranker,
)
from gateway.skills.semantic import load_embedder

DATASETS = benchmark_queries()


def changed(rank: Ranker, queries: Sequence[str], recorded: Sequence[str]) -> list[str]:
    """The queries whose top 10 differs from the recorded one."""
    return [
        query for query, now, then in zip(queries, ranking_digests(rank, queries), recorded, strict=True) if now != then
    ]


@pytest.mark.parametrize("dataset", ["livemcpbench", "metatool"])
def test_word_matching_ranks_every_benchmark_query_as_recorded(dataset: str) -> None:
    tools, queries = DATASETS[dataset]
    recorded = json.loads(RANKINGS.read_text(encoding="utf-8"))[dataset]["word"]
    assert changed(new_ranker(tools), queries, recorded) == []


@pytest.mark.parametrize("dataset", ["livemcpbench", pytest.param("metatool", marks=pytest.mark.slow)])
def test_fused_ranking_ranks_every_benchmark_query_as_recorded(
    dataset: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tools, queries = DATASETS[dataset]
    recorded = json.loads(RANKINGS.read_text(encoding="utf-8"))[dataset]["fused"]
    embedder = load_embedder(tmp_path_factory.mktemp("models"))
    rank = new_ranker(tools, semantic=semantic_ranker(tools, embedder))
    assert changed(rank, queries, recorded) == []
