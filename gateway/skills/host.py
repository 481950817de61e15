"""Skills inside the running gateway: which skills and tools a session may reach, and its active set.

`SkillHost` joins the pure parts (skill folders, the BM25 index, `ActiveSkills`) to the live
catalog. It decides the access rule shared by every call path:
- a core tool is always reachable;
- an extended tool is reachable when an active skill carries it, or when no skill carries it
  at all (then Find_Tools is the way to discover it);
- otherwise the call is refused with the name of the skill to load.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import mcp_types as types

from gateway.catalog.merged import Catalog
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings
from gateway.errors import ProtocolError, ToolRefusedError, clip
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.runtime.metrics import Metrics
from gateway.skills.disclosure import ActiveSkills
from gateway.skills.folder import Skill, SkillSet
from gateway.skills.search import SearchItem, SemanticRanker, ToolIndex, parameter_text
from gateway.stores.database import DatabaseError

if TYPE_CHECKING:
    # Only for its type: the module needs the `semantic` extra, imported when an index is built.
    from gateway.skills.semantic import VectorCache

log = logging.getLogger(__name__)

STATE_KEY = "gateway.skills"
# The background loop keeping Find_Tools' index (`SkillHost.keep_index`), as `check` and logs name it.
INDEX_LOOP = "find_tools_index"
SKILL_SCHEME = "skill://"
SKILL_FILE = "SKILL.md"
# Under the data directory: the semantic model's token table, unpacked there from its package once.
MODEL_DIR = "models"
Notify = Callable[[SessionContext], Awaitable[None]]
ToolFilter = Callable[[SessionContext, ToolRecord], bool]
# The session, then the skill's name and the roles its folder names.
SkillFilter = Callable[[SessionContext, str, tuple[str, ...]], bool]


class SkillNotActiveError(ToolRefusedError):
    """An extended tool was called while no active skill carries it."""

    reason = "skill_not_active"


class SkillHost:
    """The skills of one gateway and every session's active set."""

    def __init__(
        self,
        skills: SkillSet,
        catalog: Catalog,
        settings: GatewaySettings,
        may_see: ToolFilter,
        may_see_skill: SkillFilter,
        notify: Notify,
        metrics: Metrics,
    ) -> None:
        self.skills = skills
        self._metrics = metrics
        self._catalog = catalog
        self._settings = settings
        self._may_see = may_see
        self._may_see_skill = may_see_skill
        self._notify = notify
        self._carriers: dict[str, list[str]] = {}
        self._members: dict[str, list[str]] = {}
        self._index: ToolIndex | None = None
        self.semantic_problem: str | None = None
        """Why Find_Tools ranks by word matching alone, when the semantic model would not load."""
        self.vectors: VectorCache | None = None
        """Where the tools' embeddings outlive an index build (the gateway's store, once opened)."""
        self._generation = 0
        self._building = anyio.Lock()
        self._changed: anyio.Event | None = None
        self.replace(skills)

    def replace(self, skills: SkillSet) -> None:
        """Serve `skills` (the skill folders read again) from now on; broken ones are logged."""
        self.skills = skills
        for problem in skills.problems:
            log.warning("skill not loaded: %s", problem)
        self.refresh()

    @property
    def names(self) -> list[str]:
        """Every loaded skill's name."""
        return sorted(self.skills.skills)

    def refresh(self) -> None:
        """Recompute which tools each skill brings after a catalog change; the search index is built
        again by `keep_index`, or at the next search when that does not run."""
        names = [tool.name for tool in self._catalog.tools]
        self._members = {skill.name: skill.tool_names(names) for skill in self.skills.skills.values()}
        self._carriers = {}
        for skill_name, members in self._members.items():
            for tool_name in members:
                self._carriers.setdefault(tool_name, []).append(skill_name)
        self._index = None
        self._generation += 1
        if self._changed is not None:
            self._changed.set()

    async def keep_index(self) -> None:
        """Build the search index again after every catalog change, in a worker thread, so the
        first search after it finds the index ready and only the tools that changed are embedded
        (the others' vectors are in the store). Changes arriving during a build are folded into the
        next one: upstreams join the catalog one by one at start-up, and indexing the whole catalog
        at each of them was most of the gateway's CPU until the catalog was full."""
        while True:
            changed = self._changed = anyio.Event()
            await self._current_index()
            await changed.wait()

    def _search_item(self, tool: ToolRecord) -> SearchItem:
        """What Find_Tools matches `tool` by: its name, description and parameters, its server, and
        the names and descriptions of the skills carrying it that name no roles. The index is one for
        every caller: the words of a skill some roles may not see must not move results for them."""
        carriers = [self.skills.skills[name] for name in self._carriers.get(tool.name, [])]
        carriers = [skill for skill in carriers if not skill.roles]
        return SearchItem(
            tool.name,
            tool.description,
            skills=" ".join(f"{skill.name} {skill.description}" for skill in carriers),
            parameters=parameter_text(tool.input_schema),
            server=tool.source,
        )

    def members(self, skill_name: str) -> list[str]:
        """The catalog tools a skill's allowed-tools select, in catalog order."""
        return self._members.get(skill_name, [])

    def carriers(self, tool_name: str) -> list[str]:
        """Skills whose allowed-tools include `tool_name`."""
        return self._carriers.get(tool_name, [])

    def with_skills(self, tool: ToolRecord) -> ToolRecord:
        """`tool` with the skills that carry it filled in."""
        return replace(tool, skills=tuple(self.carriers(tool.name)))

    def state(self, session: SessionContext) -> ActiveSkills:
        """The session's active skills, created on first use."""
        active: ActiveSkills | None = session.state.get(STATE_KEY)
        if active is None:
            active = ActiveSkills(self._settings.skill_capacity, self._settings.max_extended_tools)
            session.state[STATE_KEY] = active
        return active

    # The Disclosure protocol of the meta-tools

    def visible_skills(self, session: SessionContext) -> list[Skill]:
        """Skills the session's role may see, leaving out those whose every catalog tool is hidden from it."""
        return [skill for skill in (self.skills.skills[name] for name in self.names) if self._shows(session, skill)]

    def _shows(self, session: SessionContext, skill: Skill) -> bool:
        if not self._may_see_skill(session, skill.name, skill.roles):
            return False
        members = [tool for tool in (self._catalog.tool(name) for name in self.members(skill.name)) if tool]
        # A skill that would bring only hidden tools is useless to the caller, and its name and
        # description would tell of tools it may not know of. One selecting no tool yet still shows.
        return not members or any(self._may_see(session, tool) for tool in members)

    def skill_tools(self, session: SessionContext, skill: Skill) -> list[ToolRecord]:
        """The tools `skill` brings that the session may see."""
        tools = (self._catalog.tool(name) for name in self.members(skill.name))
        return [tool for tool in tools if tool is not None and self._may_see(session, tool)]

    async def activate(self, session: SessionContext, skill: Skill) -> tuple[bool, list[str]]:
        """Load `skill` for the session; whether it was active already, and what was evicted."""
        tools = [tool.name for tool in self.skill_tools(session, skill)]
        outcome = self.state(session).load(skill.name, tools, skill.lifecycle)
        if not outcome.already_active:
            self._metrics.skill_loaded(skill.name, outcome.evicted)
            await self._notify(session)
        return outcome.already_active, outcome.evicted

    async def deactivate(self, session: SessionContext, name: str | None, task_done: bool) -> list[str]:
        """Unload one skill and/or every task-scoped skill; the names that left."""
        active = self.state(session)
        removed = [name] if name is not None and active.unload(name) else []
        if task_done:
            removed += active.finish_task()
        if removed:
            await self._notify(session)
        return removed

    def active_skills(self, session: SessionContext) -> list[str]:
        """Active skill names, most recently used first."""
        return self.state(session).active()

    async def search(self, session: SessionContext, query: str, limit: int) -> list[tuple[ToolRecord, list[str]]]:
        """Tools matching `query` among those the session may see, with the skills carrying each."""

        def allowed(name: str) -> bool:
            tool = self._catalog.tool(name)
            return tool is not None and self._may_see(session, tool)

        index = await self._current_index()
        by_meaning = index.prepares
        if by_meaning:
            try:
                await anyio.to_thread.run_sync(index.prepare, query)
            except OSError as error:
                # An embeddings endpoint that stopped answering after the index was built.
                log.warning("Find_Tools ranks this search by word matching alone: %s", error)
                by_meaning = False
        hits = index.search(query, limit, allowed, by_meaning)
        found = ((self._catalog.tool(hit.name), self._visible_carriers(session, hit.name)) for hit in hits)
        return [(tool, skills) for tool, skills in found if tool is not None]

    async def _current_index(self) -> ToolIndex:
        """The index of the catalog as it is, built in a worker thread when missing (hundreds of
        milliseconds for thousands of tools, which would stall every other session on the event
        loop); searches arriving meanwhile wait for the same build. A build the catalog changed
        under serves the searches that waited for it and is not kept."""
        async with self._building:
            if self._index is not None:
                return self._index
            generation = self._generation
            items = [self._search_item(tool) for tool in self._catalog.tools]
            index = await anyio.to_thread.run_sync(self._build_index, items)
            if generation == self._generation:
                self._index = index
            return index

    def _build_index(self, items: list[SearchItem]) -> ToolIndex:
        """Word matching over `items`, fused with the semantic ranker when the model loads (not
        loaded for an empty catalog: a gateway whose servers have not joined yet needs none)."""
        return ToolIndex(items, self._semantic_ranker(items) if items else None)

    def _semantic_ranker(self, items: list[SearchItem]) -> SemanticRanker | None:
        """The embedding ranker over `items`, or None (with a warning, once) when the model cannot load."""
        if self._settings.find_tools_model == "none":
            return None
        try:
            from gateway.skills.semantic import EmbeddingRanker, load_embedder

            model, endpoint = self._settings.find_tools_model, self._settings.find_tools_endpoint
            if endpoint is None:
                ranker = EmbeddingRanker(load_embedder(self._settings.data_dir / MODEL_DIR), items, cache=self.vectors)
            else:
                from gateway.skills.endpoint import EndpointEmbedder

                # Vectors of an endpoint's model are kept apart from a bundled model's of the same name.
                remote = EndpointEmbedder(endpoint, model)
                remote.embed(["warm"])  # an endpoint that does not answer shows here rather than at a search
                ranker = EmbeddingRanker(remote, items, cache=self.vectors, model=f"{endpoint} {model}")
        except (ImportError, OSError, MemoryError, ValueError, DatabaseError) as error:
            model = self._settings.find_tools_model
            problem = f"semantic model {model} not loaded ({error.__class__.__name__}: {error})"
            if problem != self.semantic_problem:
                log.warning("Find_Tools ranks by word matching alone: %s", problem)
            self.semantic_problem = problem
            return None
        self.semantic_problem = None
        return ranker

    def check_semantic(self) -> str | None:
        """Load the semantic model now (as the first search would); why it cannot load, or None."""
        self._semantic_ranker([])
        return self.semantic_problem

    def _visible_carriers(self, session: SessionContext, tool_name: str) -> list[str]:
        """The skills carrying `tool_name` that the session's role may see (never name hidden ones)."""
        carriers = self.carriers(tool_name)
        return [skill.name for skill in self.visible_skills(session) if skill.name in carriers]

    def handle_of(self, session: SessionContext) -> str | None:
        """The handle a session-less client passes back to reach this state."""
        return session.handle

    # Skills as MCP resources

    def resources(self, session: SessionContext) -> list[types.Resource]:
        """`skill://<name>/SKILL.md` and every bundled file of the skills the session may see."""
        listed = []
        for skill in self.visible_skills(session):
            listed.append(
                types.Resource(
                    uri=f"{SKILL_SCHEME}{skill.name}/{SKILL_FILE}",
                    name=skill.name,
                    description=skill.description,
                    mime_type="text/markdown",
                )
            )
            listed += [
                types.Resource(uri=f"{SKILL_SCHEME}{skill.name}/{path}", name=f"{skill.name}/{path}")
                for path in skill.files()
            ]
        return listed

    def read_resource(self, session: SessionContext, uri: str) -> types.ReadResourceResult:
        """The content of a `skill://` resource; unknown skills and paths are protocol errors."""
        name, _, path = uri.removeprefix(SKILL_SCHEME).partition("/")
        skill = next((s for s in self.visible_skills(session) if s.name == name), None)
        if skill is None or not path:
            raise ProtocolError(f"Unknown resource: {clip(uri)}")
        if path == SKILL_FILE:
            text = (skill.folder / SKILL_FILE).read_text(encoding="utf-8")
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/markdown")]
            )
        content = skill.read_file(path)
        if isinstance(content, bytes):
            blob = base64.b64encode(content).decode()
            return types.ReadResourceResult(contents=[types.BlobResourceContents(uri=uri, blob=blob)])
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=content)])

    # Access and lifecycle around calls

    def active_tools(self, session: SessionContext) -> set[str]:
        """Tool names the session's active skills bring."""
        active: ActiveSkills | None = session.state.get(STATE_KEY)
        return active.tools() if active is not None else set()

    def check_access(self, session: SessionContext, tool: ToolRecord) -> None:
        """Refuse an extended tool that an inactive skill carries, saying which skill to load."""
        if tool.layer == "core":
            return
        if not self.carriers(tool.name) or tool.name in self.active_tools(session):
            return
        visible = self._visible_carriers(session, tool.name)
        if not visible:
            # Every carrier is hidden from this role: refuse without naming skills it may not know of.
            raise SkillNotActiveError(f"Tool {tool.name} is only available through a skill you cannot load")
        raise SkillNotActiveError(
            f"Tool {tool.name} belongs to the skill {' or '.join(visible)}, which is not active",
            hint=f"Call Load_Skill with name={visible[0]!r}, then call the tool again.",
        )

    async def call_started(self, session: SessionContext, tool_name: str) -> None:
        """A call of `tool_name` begins: its skills count as used."""
        active: ActiveSkills | None = session.state.get(STATE_KEY)
        if active is not None:
            active.used(tool_name)

    async def call_completed(self, session: SessionContext) -> Sequence[str]:
        """A tool call completed: `turn` skills leave."""
        active: ActiveSkills | None = session.state.get(STATE_KEY)
        if active is None:
            return []
        left = active.after_call()
        if left:
            await self._notify(session)
        return left


class SkillAccess:
    """The pipeline step applying the skill access rule, before anything asks a person or runs."""

    def __init__(self, host: SkillHost) -> None:
        self._host = host

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        self._host.check_access(call.session, call.tool)
        return await call_next(call)


class SkillLifecycle:
    """The pipeline step keeping skills' recency and lifecycles: placed after confirmation, so only
    a call that was cleared to run counts as used and as completed."""

    def __init__(self, host: SkillHost) -> None:
        self._host = host

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        await self._host.call_started(call.session, call.tool.name)
        try:
            return await call_next(call)
        finally:
            await self._host.call_completed(call.session)
