"""Who owns each exposed tool name, and the highest risk each name has carried.

Pure: the gateway loads the book from its name store (`gateway.stores.names`), the catalog asks it
about every tool whenever it rebuilds, and the gateway writes back what changed (`pending`).

- A name belongs to the server that first held it. No other source's tool gets it while it is
  owned, whichever server lists first after a restart or a reload.
- A name `<x>__...` lies in the zone of the source whose namespace is `x` (else of the server named
  `x`); no other source's tool gets it, owned or not. Where several prefixes of the name are
  zones (`a__b__c` under `a` and `a__b`), the longest decides.
- A name is freed only when its owner is no longer in the gateway (`release`).
- A name keeps the highest risk any tool under it had: annotations never bring a tool under it
  lower (`floor`); a risk the operator configured still wins (`derive_risk`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from gateway.catalog.naming import SEPARATOR
from gateway.catalog.tools import Risk

RISKS = tuple(Risk)
"""The risk levels from lowest to highest; a level's index is its rank."""
NameRow = tuple[str, str | None, Risk | None]
"""A stored name: the name, its owner (None once freed) and the highest risk seen under it."""


@dataclass(frozen=True, slots=True)
class NameChanges:
    """What the book changed since it was last stored: names freed (by owner), claimed, and raised floors."""

    released: tuple[str, ...] = ()
    claimed: Mapping[str, str] = field(default_factory=dict)
    raised: Mapping[str, Risk] = field(default_factory=dict)

    def __bool__(self) -> bool:
        """True when there is anything to store."""
        return bool(self.released or self.claimed or self.raised)


@dataclass(frozen=True, slots=True)
class Withheld:
    """A tool left out of the catalog because its exposed name is another source's."""

    source: str
    original: str
    name: str
    holder: str
    reason: str

    def describe(self) -> str:
        """One line for the log and `check`."""
        return f"tool '{self.original}' of server '{self.source}' left out: {self.reason}"

    def as_dict(self) -> dict[str, str]:
        """JSON-ready form, for the admin API's server state."""
        return {"tool": self.original, "name": self.name, "holder": self.holder, "reason": self.reason}


def higher(one: Risk | None, other: Risk | None) -> Risk | None:
    """The higher of two risks (None is below every level)."""
    if one is None or (other is not None and RISKS.index(other) > RISKS.index(one)):
        return other
    return one


class NameBook:
    """Owners and risk floors of exposed names, the zones of namespaces, and the changes not yet stored."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}
        self._floors: dict[str, Risk] = {}
        self._zones: dict[str, str] = {}
        self._released: set[str] = set()
        self._claimed: dict[str, str] = {}
        self._raised: dict[str, Risk] = {}

    def load(self, rows: Iterable[NameRow]) -> None:
        """Take the stored names as they are (what is pending stays pending)."""
        self._owners, self._floors = {}, {}
        for name, owner, risk in rows:
            if owner is not None and owner not in self._released:
                self._owners[name] = owner
            if risk is not None:
                self._floors[name] = risk
        self._owners.update(self._claimed)
        for name, risk in self._raised.items():
            self._floors[name] = higher(self._floors.get(name), risk) or risk

    def protect(self, zones: Mapping[str, str]) -> bool:
        """Make `zones` (prefix -> the source it belongs to) the protected ones; True when they changed."""
        if dict(zones) == self._zones:
            return False
        self._zones = dict(zones)
        return True

    def owner(self, name: str) -> str | None:
        """The source that owns `name`, if any."""
        return self._owners.get(name)

    def withheld(self, source: str, original: str, name: str) -> Withheld | None:
        """Why `source` may not expose its tool `original` as `name`, or None when it may (claiming it is `claim`'s)."""
        # The zone first: the reason then does not depend on who listed first.
        zone = self._zone_of(name)
        if zone is not None and zone != source:
            return Withheld(source, original, name, zone, f"the name '{name}' is under the namespace of '{zone}'")
        owner = self._owners.get(name)
        if owner is not None and owner != source:
            reason = f"the name '{name}' belongs to server '{owner}', which held it first"
            return Withheld(source, original, name, owner, reason)
        return None

    def _zone_of(self, name: str) -> str | None:
        found: str | None = None
        end = name.find(SEPARATOR)
        while end > 0:
            found = self._zones.get(name[:end], found)
            end = name.find(SEPARATOR, end + 1)
        return found

    def owned_under(self, prefix: str, source: str) -> list[tuple[str, str]]:
        """The names `<prefix>__...` that sources other than `source` own, with their owners, in name order."""
        start = f"{prefix}{SEPARATOR}"
        owned = self._owners.items()
        return sorted((name, owner) for name, owner in owned if name.startswith(start) and owner != source)

    def claim(self, name: str, source: str) -> None:
        """`source` holds `name` now: it owns it from here on unless someone does already."""
        if name not in self._owners:
            self._owners[name] = self._claimed[name] = source

    def floor(self, name: str) -> Risk | None:
        """The highest risk seen under `name`."""
        return self._floors.get(name)

    def observe(self, name: str, risk: Risk) -> None:
        """A tool under `name` is `risk` now: the name's floor rises to it."""
        if higher(self._floors.get(name), risk) != self._floors.get(name):
            self._floors[name] = self._raised[name] = risk

    def pending(self) -> NameChanges:
        """What changed and is not stored yet, handed over once."""
        changes = NameChanges(tuple(sorted(self._released)), self._claimed, self._raised)
        self._released, self._claimed, self._raised = set(), {}, {}
        return changes

    def settle(self, owners: Mapping[str, str]) -> bool:
        """The store's owners of names just claimed (another process may have claimed one first);
        True when one differs from what this book had."""
        changed = False
        for name, owner in owners.items():
            if self._owners.get(name) != owner:
                self._owners[name] = owner
                changed = True
        return changed

    def release(self, present: Collection[str]) -> bool:
        """Free every name whose owner is not among the `present` sources; True when one was freed."""
        gone = {owner for owner in self._owners.values() if owner not in present}
        if gone:
            self._owners = {name: owner for name, owner in self._owners.items() if owner in present}
            self._claimed = {name: owner for name, owner in self._claimed.items() if owner in present}
            self._released |= gone
        return bool(gone)
