"""Progressive disclosure: which skills a session has active, in LRU order, and the tools they bring.

Pure state fed with events (load, unload, use, call completed, task finished); recency is the
order of those events, so no clock is needed. The exact rules are written in docs/skills.md.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from gateway.errors import ToolRefusedError
from gateway.skills.folder import Lifecycle


class SkillTooLargeError(ToolRefusedError):
    """A skill brings more tools than a session may hold at once, so it cannot be loaded."""

    hint = "Use Find_Tools and Use_Tool to call the tools you need one by one."


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    """What loading a skill did: whether it was already active, and which skills it pushed out."""

    already_active: bool
    evicted: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One active skill: the tools it brings and when it leaves on its own."""

    tools: frozenset[str]
    lifecycle: Lifecycle


class ActiveSkills:
    """The active skills of one session, least recently used first internally."""

    def __init__(self, capacity: int = 3, max_extended_tools: int = 40) -> None:
        if capacity < 1 or max_extended_tools < 1:
            raise ValueError("capacity and max_extended_tools must both be at least 1")
        self.capacity = capacity
        self.max_extended_tools = max_extended_tools
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __contains__(self, skill_name: object) -> bool:
        return skill_name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def load(self, skill_name: str, tool_names: Iterable[str], lifecycle: Lifecycle) -> LoadOutcome:
        """Activate a skill, evicting least recently used skills until the caps hold.

        Loading an active skill only marks it as just used. A skill that alone brings more than
        `max_extended_tools` distinct tools is refused and nothing changes.
        """
        if skill_name in self._entries:
            self._entries.move_to_end(skill_name)
            return LoadOutcome(already_active=True)
        tools = frozenset(tool_names)
        if len(tools) > self.max_extended_tools:
            raise SkillTooLargeError(
                f"Skill {skill_name!r} brings {len(tools)} tools; a session holds at most "
                f"{self.max_extended_tools} skill tools at once"
            )
        evicted: list[str] = []
        while self._entries and (
            len(self._entries) >= self.capacity or len(self.tools() | tools) > self.max_extended_tools
        ):
            name, _ = self._entries.popitem(last=False)
            evicted.append(name)
        self._entries[skill_name] = _Entry(tools, lifecycle)
        return LoadOutcome(already_active=False, evicted=evicted)

    def unload(self, skill_name: str) -> bool:
        """Deactivate a skill; False when it was not active."""
        return self._entries.pop(skill_name, None) is not None

    def used(self, tool_name: str) -> None:
        """Mark every active skill that carries `tool_name` as just used (their order is kept)."""
        for name in [name for name, entry in self._entries.items() if tool_name in entry.tools]:
            self._entries.move_to_end(name)

    def after_call(self) -> list[str]:
        """Record that a tool call completed; returns the `turn` skills that therefore left."""
        return self._remove("turn")

    def finish_task(self) -> list[str]:
        """The model declared its task done: remove every `task` skill and return their names."""
        return self._remove("task")

    def active(self) -> list[str]:
        """Active skill names, most recently used first."""
        return list(reversed(self._entries))

    def tools(self) -> set[str]:
        """Every tool name the active skills bring, each once."""
        return {tool for entry in self._entries.values() for tool in entry.tools}

    def snapshot(self) -> dict[str, Any]:
        """The active skills, least recently used first, as JSON-ready data for a store replicas share."""
        return {"skills": [[name, sorted(entry.tools), entry.lifecycle] for name, entry in self._entries.items()]}

    @classmethod
    def restore(cls, data: Mapping[str, Any], capacity: int = 3, max_extended_tools: int = 40) -> ActiveSkills:
        """The active skills `snapshot` gave, in their order."""
        active = cls(capacity, max_extended_tools)
        for name, tools, lifecycle in data["skills"]:
            active._entries[str(name)] = _Entry(frozenset(map(str, tools)), cast(Lifecycle, lifecycle))
        return active

    def _remove(self, lifecycle: Lifecycle) -> list[str]:
        """Remove every skill of `lifecycle`; their names, most recently used first."""
        leaving = [name for name in self.active() if self._entries[name].lifecycle == lifecycle]
        for name in leaving:
            del self._entries[name]
        return leaving
