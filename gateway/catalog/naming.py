"""Exposed names: every tool and prompt name works in every client and maps back exactly.

Pure functions. A name is `<namespace>__<original>`, reduced to `[A-Za-z0-9_-]` and at most
64 characters. A name that had to be changed or shortened carries a short hash of the exact
original, so it is deterministic across restarts and two originals never share it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SEPARATOR = "__"
MAX_NAME = 64
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8
# What a caller may have put between namespace and original instead of SEPARATOR.
_OTHER_SEPARATOR = re.compile(r"[._:/ -]+")


def _digest(text: str) -> str:
    # surrogatepass: names read from JSON by the standard library may hold lone surrogates.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def exposed_name(namespace: str, original: str) -> str:
    """The client-safe name of `original` under `namespace`."""
    wanted = f"{namespace}{SEPARATOR}{original}" if namespace else original
    return fit_name(wanted, key=f"{namespace}/{original}")


def fit_name(wanted: str, *, key: str) -> str:
    """`wanted` made valid: bad characters replaced; if changed or too long, a hash of `key` appended."""
    cleaned = _INVALID_CHARS.sub("_", wanted)
    if cleaned == wanted and 0 < len(cleaned) <= MAX_NAME:
        return cleaned
    return suffixed(cleaned, key)


def suffixed(name: str, key: str) -> str:
    """`name` cut to fit with `_<hash of key>` at its end."""
    suffix = f"_{_digest(key)}"
    return name[: MAX_NAME - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class Clash:
    """Two or more entries wanted one exposed name; all but the first were renamed."""

    name: str
    kept: str
    renamed: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        """One line for the log and `check`."""
        moved = ", ".join(f"{key} -> {new}" for key, new in self.renamed)
        return f"name clash on '{self.name}': kept {self.kept}; renamed {moved}"


def assign(entries: Sequence[tuple[str, str]], reserved: Iterable[str] = ()) -> tuple[list[str], list[Clash]]:
    """Give each `(wanted_name, key)` a unique name; the first claimant keeps the name.

    `key` identifies the entry exactly (source and original name): it seeds the hash of a
    renamed entry, so the outcome depends only on the entries, never on timing.
    """
    taken = set(reserved)
    names: list[str] = []
    clashes: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    owner: dict[str, str] = {}
    for wanted, key in entries:
        name = wanted
        if name in taken:
            name = suffixed(wanted, key)
            while name in taken:
                key += "'"
                name = suffixed(wanted, key)
            first = owner.get(wanted, "(reserved)")
            clashes.setdefault(wanted, (first, []))[1].append((key.rstrip("'"), name))
        taken.add(name)
        owner[name] = key
        names.append(name)
    report = [Clash(name, kept, tuple(moved)) for name, (kept, moved) in clashes.items()]
    return names, report


def near_misses(name: str, candidates: Iterable[str]) -> list[str]:
    """The candidates `name` was probably meant to be, in this order: those it spells without their
    namespace or with another separator (in the candidates' order), then at most
    `MAX_TYPO_SUGGESTIONS` within a typo or two of it (closest first; see `typo_distance`).

    A name that keeps SEPARATOR but has another namespace names another server's tool, not a
    misspelling of this one, so it is no near miss unless the namespaces, too, are a typo apart.
    """
    listed = list(candidates)
    found: list[str] = []
    for candidate in listed:
        namespace, separator, original = candidate.partition(SEPARATOR)
        if separator and namespace and original and (name == original or _respelled(name, namespace, original)):
            found.append(candidate)
    typos: list[tuple[int, int, str]] = []
    for index, candidate in enumerate(listed):
        if candidate != name and candidate not in found:
            distance = typo_distance(name, candidate)
            if distance is not None:
                typos.append((distance, index, candidate))
    return found + [candidate for _, _, candidate in sorted(typos)[:MAX_TYPO_SUGGESTIONS]]


MAX_TYPO_SUGGESTIONS = 3


def typo_distance(name: str, candidate: str) -> int | None:
    """How many typos (a character inserted, left out, changed, or two swapped) make `name` of
    `candidate`, or of its original name when `name` has no namespace; None past the few a name of
    its length may hold: none below 4 characters, one below 9, else two."""
    budget = 0 if len(name) < 4 else 1 if len(name) < 9 else 2
    if budget == 0:
        return None
    targets = [candidate]
    namespace, separator, original = candidate.partition(SEPARATOR)
    if SEPARATOR not in name and separator and namespace and original:
        targets.append(original)
    distances = [distance for target in targets if (distance := _bounded_distance(name, target, budget)) is not None]
    return min(distances, default=None)


def _bounded_distance(a: str, b: str, budget: int) -> int | None:
    """The optimal-string-alignment distance of `a` and `b` when at most `budget`, else None.

    Only the cells within `budget` of the diagonal are computed, and the walk stops once a whole row
    is past the budget: a miss costs a few hundred steps per candidate however long the names."""
    if abs(len(a) - len(b)) > budget:
        return None
    far = budget + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [far] * (len(b) + 1)
        current[0] = i
        for j in range(max(1, i - budget), min(len(b), i + budget) + 1):
            cost = a[i - 1] != b[j - 1]
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, before[j - 2] + 1)
            current[j] = min(best, far)
        if min(current[max(0, i - budget) : i + budget + 1]) > budget:
            return None
        before, previous = previous, current
    return previous[len(b)] if previous[len(b)] <= budget else None


def _respelled(name: str, namespace: str, original: str) -> bool:
    if len(name) <= len(namespace) + len(original) or not (name.startswith(namespace) and name.endswith(original)):
        return False
    middle = name[len(namespace) : len(name) - len(original)]
    return middle != SEPARATOR and _OTHER_SEPARATOR.fullmatch(middle) is not None
