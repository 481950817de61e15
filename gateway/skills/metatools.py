"""The meta-tools of progressive disclosure: List_Skills, Load_Skill, Unload_Skill, Use_Tool,
Find_Tools and Read_Skill_File; and Run_Code, code mode's (`gateway.skills.codemode`).

They are ordinary `ToolRecord`s of the `gateway` source; `MetaTools` is that source. It asks the
`Disclosure` (what this caller may see and has active) and calls other tools back through the
gateway's pipeline, so a call made with Use_Tool is checked exactly like a direct one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import mcp_types as types

from gateway.catalog.tools import GATEWAY_SOURCE, RUN_CODE, ToolRecord
from gateway.clients.session import SessionContext
from gateway.errors import ToolInputError, ToolRefusedError, UnknownToolError, clip
from gateway.pipeline.chain import DETAIL_NOTE, NO_MATCH, ProgressFn, ToolCall
from gateway.skills.folder import Skill

LIST_SKILLS = "List_Skills"
LOAD_SKILL = "Load_Skill"
UNLOAD_SKILL = "Unload_Skill"
USE_TOOL = "Use_Tool"
FIND_TOOLS = "Find_Tools"
READ_SKILL_FILE = "Read_Skill_File"
STATE_TOOLS = frozenset({LIST_SKILLS, LOAD_SKILL, UNLOAD_SKILL, USE_TOOL, READ_SKILL_FILE})
# No enum of skill names: it would repeat every name in three schemas, the schemas would differ
# per role and name skills some roles may not see. Names are checked when called, and List_Skills
# gives each caller the names it may use.
SKILL_NAME = {"type": "string"}
# Only session-less clients need it, and Load_Skill's answer tells them what to pass; a description
# here would be repeated in five schemas of every listing.
HANDLE = {"type": "string"}
# Find_Tools gives argument schemas for this many best hits; `schemas=true` asks for every hit's.
SCHEMA_HITS = 3
# A List_Skills line (name, then the description clipped) stays within this many bytes of UTF-8.
LISTING_LINE_BYTES = 60
# A Find_Tools hit's description is clipped to this many bytes of UTF-8.
HIT_DESCRIPTION_BYTES = 160
# Only the hints a client acts on (whether to ask before a call); every byte here is in every listing.
_READ_ONLY = types.ToolAnnotations(read_only_hint=True)
_STATEFUL = types.ToolAnnotations(read_only_hint=False, destructive_hint=False)


class Disclosure(Protocol):
    """What the meta-tools need from the gateway."""

    def visible_skills(self, session: SessionContext) -> list[Skill]: ...

    def skill_tools(self, session: SessionContext, skill: Skill) -> list[ToolRecord]: ...

    async def activate(self, session: SessionContext, skill: Skill) -> tuple[bool, list[str]]: ...

    async def deactivate(self, session: SessionContext, name: str | None, task_done: bool) -> list[str]: ...

    def active_skills(self, session: SessionContext) -> list[str]: ...

    async def search(self, session: SessionContext, query: str, limit: int) -> list[tuple[ToolRecord, list[str]]]: ...

    def handle_of(self, session: SessionContext) -> str | None: ...


CallBack = Callable[
    [SessionContext, str, Mapping[str, Any], ProgressFn | None, Mapping[str, Any]], Awaitable[types.CallToolResult]
]


RunCode = Callable[[ToolCall], Awaitable[types.CallToolResult]]


def records(with_skills: bool, with_search: bool, with_code: bool = False) -> list[ToolRecord]:
    """The meta-tools worth listing: skill tools when skills exist, search and call-through when
    needed, Run_Code when code mode is on.

    They are the same for every caller, so the start-of-session listing does not grow with the
    number of skills.
    """
    result: list[ToolRecord] = []
    if with_skills:
        result += [
            _record(
                LIST_SKILLS,
                "Skills you may load, and the active ones; a query filters and shows more.",
                {"query": {"type": "string"}, "handle": HANDLE},
                [],
                _READ_ONLY,
            ),
            _record(
                LOAD_SKILL,
                "Activate a skill: gives its instructions, files and tool schemas (call them with Use_Tool).",
                {"name": SKILL_NAME, "handle": HANDLE},
                ["name"],
                _STATEFUL,
            ),
            _record(
                UNLOAD_SKILL,
                "Deactivate a skill, or all task skills with task_done=true.",
                {"name": SKILL_NAME, "task_done": {"type": "boolean"}, "handle": HANDLE},
                [],
                _STATEFUL,
            ),
            _record(
                READ_SKILL_FILE,
                "Read a bundled file of an active skill.",
                {"name": SKILL_NAME, "path": {"type": "string"}, "handle": HANDLE},
                ["name", "path"],
                _READ_ONLY,
            ),
        ]
    if with_skills or with_search:
        result += [
            _record(
                FIND_TOOLS,
                "Search tools by what they do. Ask once per step of a task, not for the whole task. "
                f"Gives name, description, skill; argument schemas of the first {SCHEMA_HITS} (schemas=true: all).",
                {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                    "schemas": {"type": "boolean", "default": False},
                },
                ["query"],
                _READ_ONLY,
            ),
            _record(
                USE_TOOL,
                "Call a tool by name: one listed, of an active skill, or found by Find_Tools.",
                {"name": {"type": "string"}, "arguments": {"type": "object"}, "handle": HANDLE},
                ["name"],
                _STATEFUL,
            ),
        ]
    if with_code:
        result.append(
            _record(
                RUN_CODE,
                "Run a Python script in a sandbox; the tools you may use are functions in package `tools` "
                "(print(tools.__doc__) lists them, help() shows one). Gives what it prints and its last "
                "expression's value.",
                {"code": {"type": "string"}},
                ["code"],
                _STATEFUL,
            )
        )
    return result


def _record(
    name: str, description: str, properties: dict[str, Any], required: list[str], annotations: types.ToolAnnotations
) -> ToolRecord:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return ToolRecord(
        name=name,
        source=GATEWAY_SOURCE,
        original_name=name,
        description=description,
        input_schema=schema,
        annotations=annotations,
    )


def _text(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


class MetaTools:
    """The `gateway` tool source: runs the meta-tools for one gateway."""

    def __init__(self, disclosure: Disclosure, call_back: CallBack, run_code: RunCode) -> None:
        self._disclosure = disclosure
        self._call_back = call_back
        self._run_code = run_code

    async def run(self, call: ToolCall) -> types.CallToolResult:
        """Run one meta-tool for the call's session."""
        session, arguments, name = call.session, call.arguments, call.tool.original_name
        if name == LIST_SKILLS:
            return self._list_skills(session, str(arguments.get("query", "")))
        if name == LOAD_SKILL:
            return await self._load_skill(session, str(arguments["name"]))
        if name == UNLOAD_SKILL:
            return await self._unload_skill(session, arguments.get("name"), bool(arguments.get("task_done", False)))
        if name == READ_SKILL_FILE:
            return self._read_skill_file(session, str(arguments["name"]), str(arguments["path"]))
        if name == FIND_TOOLS:
            limit, schemas = int(arguments.get("limit", 10)), bool(arguments.get("schemas", False))
            found = await self._find_tools(session, str(arguments["query"]), limit, schemas)
            if found.structured_content == {"tools": []}:
                # Counted on the dashboard: searches that found nothing point at tools people lack.
                call.notes[DETAIL_NOTE] = NO_MATCH
            return found
        if name == RUN_CODE:
            return await self._run_code(call)
        return await self._use_tool(call, str(arguments["name"]), arguments.get("arguments") or {})

    async def _use_tool(self, call: ToolCall, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        try:
            return await self._call_back(call.session, name, arguments, call.progress, call.notes)
        except UnknownToolError as unknown:
            # The model named the tool inside Use_Tool's arguments, so a wrong name is an argument
            # it can fix, answered as a tool result rather than a protocol error it may never see.
            raise ToolInputError(
                f"Use_Tool: no tool named {clip(name)!r}{unknown.did_you_mean}",
                hint="Call Find_Tools to search tools by what they do, then pass an exact name it returns.",
            ) from None

    def _skill(self, session: SessionContext, name: str) -> Skill:
        for skill in self._disclosure.visible_skills(session):
            if skill.name == name:
                return skill
        raise ToolRefusedError(
            f"No skill named {clip(name)!r}", hint="Call List_Skills to see the skills you can load."
        )

    def _list_skills(self, session: SessionContext, query: str) -> types.CallToolResult:
        active = self._disclosure.active_skills(session)
        words = query.casefold().split()
        skills = [
            skill
            for skill in self._disclosure.visible_skills(session)
            if all(word in f"{skill.name} {skill.description}".casefold() for word in words)
        ]
        structured = {"skills": [skill.name for skill in skills], "active": active}
        return _text(skill_listing(skills, active, whole=bool(words)), structured)

    async def _load_skill(self, session: SessionContext, name: str) -> types.CallToolResult:
        skill = self._skill(session, name)
        already, evicted = await self._disclosure.activate(session, skill)
        tools = self._disclosure.skill_tools(session, skill)
        schemas = [tool.to_mcp().model_dump(by_alias=True, exclude_none=True) for tool in tools]
        files = skill.files()
        parts = [
            f"Skill {skill.name} is {'already ' if already else ''}active.",
            f'<skill name="{skill.name}">\n{skill.body.strip()}\n</skill>',
        ]
        if files:
            parts.append("Bundled files (read with Read_Skill_File):\n" + "\n".join(f"- {f}" for f in files))
        if tools:
            parts.append(
                "Tools of this skill (call them with Use_Tool):\n"
                + json.dumps(schemas, separators=(",", ":"), sort_keys=True)
            )
        if evicted:
            parts.append(f"Unloaded to make room: {', '.join(evicted)}.")
        structured: dict[str, Any] = {
            "skill": skill.name,
            "already_active": already,
            "evicted": evicted,
            "files": files,
            "tools": [tool.name for tool in tools],
        }
        handle = self._disclosure.handle_of(session)
        if handle is not None:
            structured["handle"] = handle
            parts.append(f"Pass handle={handle!r} to later meta-tool calls.")
        return _text("\n\n".join(parts), structured)

    async def _unload_skill(self, session: SessionContext, name: object, task_done: bool) -> types.CallToolResult:
        if name is None and not task_done:
            raise ToolRefusedError(
                "Give a skill name, or task_done=true", hint="Call List_Skills to see active skills."
            )
        removed = await self._disclosure.deactivate(session, None if name is None else str(name), task_done)
        text = f"Unloaded: {', '.join(removed)}." if removed else "Nothing to unload."
        return _text(text, {"unloaded": removed, "active": self._disclosure.active_skills(session)})

    def _read_skill_file(self, session: SessionContext, name: str, path: str) -> types.CallToolResult:
        skill = self._skill(session, name)
        if name not in self._disclosure.active_skills(session):
            raise ToolRefusedError(f"Skill {name!r} is not active", hint=f"Call Load_Skill with name={name!r} first.")
        content = skill.read_file(path)
        if isinstance(content, bytes):
            return _text(f"{path} is a binary file of {len(content)} bytes; it cannot be shown as text.")
        return _text(f'<file skill="{name}" path="{path}">\n{content}\n</file>')

    async def _find_tools(self, session: SessionContext, query: str, limit: int, schemas: bool) -> types.CallToolResult:
        return found_tools(await self._disclosure.search(session, query, limit), schemas)


def skill_listing(skills: Sequence[Skill], active: Sequence[str], whole: bool) -> str:
    """List_Skills' text: one line per skill, its description clipped unless `whole` (after a query)."""
    if not skills:
        return "No skills match."
    lines = []
    for skill in skills:
        room = HIT_DESCRIPTION_BYTES if whole else LISTING_LINE_BYTES - len(skill.name.encode()) - 2
        lines.append(f"{skill.name}: {clip_bytes(_first_line(skill.description), room)}")
    if active:
        lines.append(f"Active: {', '.join(active)}.")
    return "Skills (Load_Skill by name; List_Skills with a query shows more):\n" + "\n".join(lines)


def found_tools(hits: Sequence[tuple[ToolRecord, list[str]]], schemas: bool) -> types.CallToolResult:
    """Find_Tools' answer: name, one-line description and carrying skills per hit; argument
    schemas for the first `SCHEMA_HITS` hits, or for all with `schemas`.

    A tool no skill carries is called straight from this answer, so the schema of a hit beyond
    the first few is one `schemas=true` call (or a Use_Tool validation error) away.
    """
    if not hits:
        return _text("No tools match.", {"tools": []})
    rows: list[dict[str, Any]] = []
    lines = []
    for number, (tool, skills) in enumerate(hits):
        row: dict[str, Any] = {
            "name": tool.name,
            "description": clip_bytes(_first_line(tool.description), HIT_DESCRIPTION_BYTES),
            "skills": skills,
        }
        line = f"- {tool.name}: {row['description']}" + (f" (skill: {', '.join(skills)})" if skills else "")
        if schemas or number < SCHEMA_HITS:
            row["input_schema"] = tool.input_schema
            line += f"\n  arguments: {json.dumps(tool.input_schema, separators=(',', ':'), sort_keys=True)}"
        rows.append(row)
        lines.append(line)
    return _text("Tools (call with Use_Tool):\n" + "\n".join(lines), {"tools": rows})


def clip_bytes(text: str, size: int) -> str:
    """`text` within `size` bytes of UTF-8, cut at a word end where one is near, marked with an ellipsis."""
    if len(text.encode()) <= size:
        return text
    cut = text.encode()[: max(size - 3, 0)].decode(errors="ignore")
    word_end = cut.rfind(" ")
    if word_end > len(cut) * 2 // 3:
        cut = cut[:word_end]
    return cut.rstrip(" ,;:.") + "…"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:200]
