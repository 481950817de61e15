"""Tool poisoning: instructions aimed at the model in a tool's model-visible text, found and flagged.

Pure: `scan` reads a tool's title, description, annotation title and every key and string of its
input and output schemas, and returns what looks like text meant for the model rather than for a
person: characters nobody sees (Unicode tag characters, zero-width and bidi controls), long
padding, `<IMPORTANT>`-style blocks, "ignore previous instructions", "do not tell the user",
references to secret files, exfiltration, and instructions about other tools. It flags and never
changes or blocks anything; docs/security.md lists the heuristics and their measured false
positives.

Each phrase starts with a word found by `str.find`; the pattern matched right after it repeats only
whitespace or a bounded gap, never a nested group, so a scan is linear in the text. Hidden
characters are taken out, tag characters decoded and the rest NFKC-folded before the phrases are
looked for, so an instruction spelled in tag characters, split by zero-width spaces or written in
full-width letters is found as well.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # For annotations only: the command line shows findings without loading the SDK's types.
    from gateway.catalog.tools import ToolRecord

MAX_FINDINGS = 10
"""Findings kept per tool, in the order of the definition: a hostile schema could otherwise make thousands."""
EXCERPT_CONTEXT = 30
EXCERPT_CHARS = 160

_TAG_FIRST, _TAG_LAST = 0xE0000, 0xE007F
# Characters that show nothing or change what is shown: controls but tab and line breaks, the soft
# hyphen, joiners and zero-width spaces, bidirectional controls, fillers, invisible operators,
# variation selectors, interlinear annotations, tag characters. One character class, so runs come
# out whole; printable ASCII, most text, is told apart without it.
_SUSPECT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef]+"
)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# How emoji are written, left alone: a lone emoji or text presentation selector, and a zero-width
# joiner (after a selector or not) between two emoji, as in a family or a flag.
_SELECTORS = frozenset({"\ufe0e", "\ufe0f"})
_JOINERS = frozenset({"\u200d", "\ufe0f\u200d", "\ufe0e\u200d"})
_EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff]")
_RUN_PARTS = re.compile("[\U000e0000-\U000e007f]+|.", re.DOTALL)
_WIDE_GAP = re.compile(r"[^\S\n]{40,}")
_BLANK_LINES = 10

REASONS: Mapping[str, str] = {
    "tag_characters": "hidden Unicode tag characters (text only a model reads)",
    "bidi_controls": "bidirectional controls that reorder what a person sees",
    "invisible_characters": "invisible characters (zero-width, joiners, controls)",
    "padding": "long blank padding that pushes text out of view",
    "model_block": "a block addressed to the model (<IMPORTANT>, <system>, chat markers, an HTML comment)",
    "instruction_override": "tells the model to ignore or replace its instructions",
    "concealment": "tells the model to keep something from the user",
    "secret_access": "names secret files (SSH keys, .env, credentials)",
    "exfiltration": "tells the model to send data out or to pass on conversation, prompts or secrets",
    "other_tools": "instructions about how other tools are used",
}
"""Each kind of finding, as a person reads it; the order findings of one place are given in."""

_GAP = r"[^.\n\x00]{0,80}?"
_TELL = (
    r"\s+(?:tell|telling|inform|informing|notify|notifying|alert|alerting|mention|mentioning|reveal|revealing"
    r"|show|showing)\s+(?:(?:this|that|it|anything)\s+(?:to\s+)?)?(?:the\s+)?user\b"
)
_HUSH = r"\s+(?:mention|reveal|disclose)\s+(?:these|this|that)\s+(?:instructions?|step)"
_OVERRIDE = (
    r"\s+(?:(?:all|any|the|your|of|these)\s+){0,3}(?:previous|prior|above|earlier|preceding|former|original"
    r"|other|system|safety)\s+(?:instructions?|prompts?|rules|directions|directives|guidelines|messages|context)\b"
)
_DESTINATION = (
    r"\b" + _GAP + r"\bto\s+(?:https?://|[\w.+-]{1,64}@[\w-]{1,64}\.|(?:an?\s+|the\s+|this\s+)?(?:external|remote"
    r"|attacker'?s?|third[- ]party|following)\s+(?:server|url|address|endpoint|host|e-?mail|site|webhook))"
)
_SENSITIVE = (
    r"\b" + _GAP + r"\b(?:(?:whole|full|entire|complete)\s+)?(?:(?:conversation|chat|message)\s+(?:history|log"
    r"|so\s+far)|(?:previous|prior)\s+messages|system\s+prompt|(?:your|the\s+user'?s?)\s+(?:api\s+keys?"
    r"|credentials|passwords?|secrets|tokens|private\s+keys?))\b"
)
_OTHER_TOOLS = r"\s+(?:any|all|every|the\s+other|other|another)\s+(?:other\s+)?tools?\b"
_USING = r"\s+(?:using|calling|invoking|running)" + _OTHER_TOOLS
_BEYOND = r"\b[^.\n\x00]{0,40}?\b(?:other|another|all|every)\s+(?:other\s+)?tools?\b"
# Each kind: words (split on "|") and the pattern that must follow one of them, all in lower case.
# The words are found with `str.find`, which skips plain text far faster than a pattern search;
# a word that starts with a letter or a dot must not follow a letter, digit, `_` or dot.
_KINDS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "model_block": (
        (
            "<",
            r"\s*/?\s*(?:important|system(?:[-_ ]?(?:prompt|message|reminder|instructions?))?|instructions?|hidden"
            r"|critical|assistant|ai|llm|note[-_ ]to[-_ ](?:the[-_ ])?(?:ai|assistant|model|llm))\s*>"
            r"|\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|</?sys>>|!--",
        ),
        ("[", r"/?inst\]"),
    ),
    "instruction_override": (
        ("ignore|disregard|forget|override|bypass", _OVERRIDE),
        ("new|updated|real|actual", r"\s+(?:system\s+)?instructions?\s*:"),
        ("from", r"\s+now\s+on\s*,?\s+you\b"),
    ),
    "concealment": (
        ("do|must|should", r"\s+not(?:" + _TELL + "|" + _HUSH + ")"),
        ("don", r"'?t(?:" + _TELL + "|" + _HUSH + ")"),
        ("never", _TELL + "|" + _HUSH),
        ("without", _TELL + r"|\s+the\s+user'?s?\s+(?:knowing|noticing|knowledge|consent)\b"),
        ("user", r"\s+(?:must|should)\s+(?:not|never)\s+(?:know|see|notice|find\s+out|be\s+told)\b"),
        ("keep|hide", r"\s+(?:this|it|these\s+\w{1,30})\s+(?:(?:secret|hidden)\s+)?from\s+the\s+user\b"),
    ),
    "secret_access": (
        ("~/.ssh|.env|.gnupg|.netrc|.npmrc|.pypirc|.pgpass|.git-credentials|.bash_history|.zsh_history", r"\b"),
        (".ssh/|.aws/credentials|.kube/config|.docker/config.json|claude_desktop_config.json", ""),
        ("id_", r"(?:rsa|dsa|ecdsa|ed25519)\b"),
        ("/etc/", r"(?:passwd|shadow|sudoers)\b"),
        ("mcp.json|wallet.dat", r"\b"),
    ),
    "exfiltration": (
        ("sends|sending|post|posting|upload|uploading|forwarding|transmit|email|e-mail|beacon", _DESTINATION),
        ("send|forward|leak|exfiltrate", _DESTINATION + "|" + _SENSITIVE),
        ("include|embed|insert|append|attach|copy|pass|add", _SENSITIVE),
    ),
    "other_tools": (
        ("when|whenever|before|after", _USING),
        ("instead", r"\s+of" + _USING),
        ("side", r"\s+effects?" + _BEYOND),
        ("take|takes", r"\s+precedence" + _BEYOND),
        ("override|overrides|replace|replaces", _BEYOND),
    ),
}
_MATCHERS: Mapping[str, tuple[tuple[str, re.Pattern[str], bool], ...]] = {
    kind: tuple(
        (word, re.compile(rest), word[0].isalnum() or word[0] == ".")
        for words, rest in entries
        for word in words.split("|")
    )
    for kind, entries in _KINDS.items()
}
_SEPARATOR = "\x00"
"""Between the readable pieces of one tool: a hidden character, so no piece holds one, and one no pattern crosses."""
# JSON Schema's keywords and type names: fixed words that say nothing, so a schema's pieces are
# mostly its own names, descriptions and values.
_SCHEMA_WORDS = frozenset([
    "$schema", "$id", "$ref", "$defs", "$comment", "$anchor", "definitions", "type", "properties", "required",
    "description", "title", "items", "prefixItems", "additionalProperties", "patternProperties", "propertyNames",
    "enum", "const", "default", "examples", "format", "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "uniqueItems", "contains", "minProperties", "maxProperties", "dependentRequired",
    "dependentSchemas", "readOnly", "writeOnly", "deprecated", "nullable", "contentMediaType", "contentEncoding",
    "unevaluatedProperties", "unevaluatedItems", "string", "number", "integer", "boolean", "array", "object", "null",
])  # fmt: skip
_LINE_BREAKS = str.maketrans("", "", "\t\n\r")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason to look at a tool: what was found (a key of `REASONS`), where in the definition
    (`description`, `input_schema.properties.path.description`, ...), and the text around it with
    hidden characters made visible."""

    kind: str
    where: str
    excerpt: str

    @property
    def reason(self) -> str:
        """The kind as a person reads it."""
        return REASONS[self.kind]

    def as_json(self) -> dict[str, str]:
        """The finding as the admin API gives it."""
        return {"kind": self.kind, "reason": self.reason, "where": self.where, "excerpt": self.excerpt}


class Flags:
    """The findings of a catalog's tools, each definition scanned once: read by the admin API, the
    web page and the metrics; `refresh` says which tools are newly flagged, to be told once."""

    def __init__(self) -> None:
        # Exposed name -> (the record scanned, its findings); a catalog keeps unchanged records as they were.
        self._scanned: dict[str, tuple[ToolRecord, tuple[Finding, ...]]] = {}
        # (source, original name) -> the findings last told
        self._told: dict[tuple[str, str], tuple[Finding, ...]] = {}

    def of(self, tool: ToolRecord) -> tuple[Finding, ...]:
        """The findings of `tool`, scanned when its definition is new."""
        kept = self._scanned.get(tool.name)
        if kept is not None and kept[0] is tool:
            return kept[1]
        found = scan(tool)
        self._scanned[tool.name] = (tool, found)
        return found

    def refresh(self, tools: Sequence[ToolRecord]) -> list[tuple[ToolRecord, tuple[Finding, ...]]]:
        """Follow the catalog's `tools`: the flagged ones whose findings were not told before."""
        told = []
        for tool in tools:
            found = self.of(tool)
            key = (tool.source, tool.original_name)
            if found and self._told.get(key) != found:
                self._told[key] = found
                told.append((tool, found))
        names = {tool.name for tool in tools}
        self._scanned = {name: kept for name, kept in self._scanned.items() if name in names}
        return told

    def per_source(self) -> dict[str, int]:
        """How many of each source's tools are flagged (0 for a source without any), as last refreshed."""
        counts: dict[str, int] = {}
        for tool, found in self._scanned.values():
            counts[tool.source] = counts.get(tool.source, 0) + bool(found)
        return counts


def scan(tool: ToolRecord) -> tuple[Finding, ...]:
    """What in `tool`'s model-visible text looks aimed at the model, at most `MAX_FINDINGS`, in
    the order of the definition."""
    return tuple(_scan(list(_texts(tool)))[:MAX_FINDINGS])


def scan_text(text: str, where: str) -> list[Finding]:
    """The findings in one piece of text found at `where`, at most one of each kind, in the order of `REASONS`."""
    return _scan([(where, text)])


def _scan(pieces: list[tuple[str, str]]) -> list[Finding]:
    """The findings of each piece, at most one of each kind a piece, pieces in order, kinds in the order
    of `REASONS`. The phrases are looked for in all pieces joined: one pass a word, not one a piece."""
    found: list[list[Finding]] = []
    plains: list[str] = []
    for where, text in pieces:
        if text.isascii() and text.isprintable() and "    " not in text:
            # Most pieces: nothing hidden, no padding, nothing to fold.
            found.append([])
            plains.append(text)
        else:
            runs = _hidden_runs(text)
            found.append(_hidden(text, where, runs))
            plains.append(_readable(text, runs))
    starts = list(accumulate((len(plain) + 1 for plain in plains), initial=0))
    joined = _SEPARATOR.join(plains)
    # Lower case without changing any length, so that offsets stay those of the readable text.
    text = joined.lower() if joined.isascii() else joined.translate(_ASCII_LOWER)
    for kind, matchers in _MATCHERS.items():
        first: dict[int, tuple[int, int]] = {}
        for word, rest, bounded in matchers:
            position = 0
            while (at := text.find(word, position)) >= 0:
                position = at + 1
                if bounded and at and (text[at - 1].isalnum() or text[at - 1] in "_."):
                    continue
                match = rest.match(text, at + len(word))
                if match is None:
                    continue
                index = bisect_right(starts, at) - 1
                if index not in first or at < first[index][0]:
                    first[index] = (at, match.end())
                position = starts[index + 1]
        for index, (at, end) in first.items():
            plain, offset = plains[index], starts[index]
            found[index].append(Finding(kind, pieces[index][0], _excerpt(plain, at - offset, end - offset)))
    order = {kind: rank for rank, kind in enumerate(REASONS)}
    return [finding for each in found for finding in sorted(each, key=lambda finding: order[finding.kind])]


def readable(text: str) -> str:
    """`text` as a model reads it and the phrase patterns look at it: tag characters decoded to the
    ASCII they hide, other hidden characters taken out, compatibility forms (full-width letters) folded."""
    return _readable(text, _hidden_runs(text))


def _readable(text: str, runs: list[tuple[int, int]]) -> str:
    if not runs and text.isascii():
        return text
    return unicodedata.normalize(
        "NFKC", _rebuilt(text, runs, lambda run: f" {_decoded(run)} " if _has_tags(run) else "")
    )


def visible(text: str) -> str:
    """`text` with every hidden character shown: a run of tag characters as `<tags "...">` with the
    ASCII it spells, each other one as its code point, `<U+200B>`."""
    return _rebuilt(text, _hidden_runs(text), _shown)


def _hidden_runs(text: str) -> list[tuple[int, int]]:
    """Where the runs of hidden characters are, those that write emoji left out."""
    if text.isascii() and (text.isprintable() or text.translate(_LINE_BREAKS).isprintable()):
        return []  # the common case, told apart at C speed without a pattern search
    runs = []
    for match in _SUSPECT.finditer(text):
        start, end = match.span()
        run = match.group()
        if run in _SELECTORS:
            continue
        if run in _JOINERS and start > 0 and _EMOJI.match(text, start - 1) and _EMOJI.match(text, end):
            continue
        runs.append((start, end))
    return runs


def _rebuilt(text: str, runs: list[tuple[int, int]], replace: Callable[[str], str]) -> str:
    """`text` with each run replaced by what `replace` makes of it."""
    parts, last = [], 0
    for start, end in runs:
        parts += [text[last:start], replace(text[start:end])]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _shown(run: str) -> str:
    def one(part: re.Match[str]) -> str:
        chars = part.group()
        return f'<tags "{_decoded(chars)}">' if _has_tags(chars) else f"<U+{ord(chars):04X}>"

    return _RUN_PARTS.sub(one, run)


def _has_tags(run: str) -> bool:
    return any(_TAG_FIRST <= ord(char) <= _TAG_LAST for char in run)


def _decoded(run: str) -> str:
    """The ASCII the tag characters of a run spell (the language tag and cancel tag spell nothing)."""
    return "".join(chr(ord(char) - _TAG_FIRST) for char in run if 0x20 <= ord(char) - _TAG_FIRST < 0x7F)


def _hidden(text: str, where: str, runs: list[tuple[int, int]]) -> list[Finding]:
    """Findings about characters (its hidden `runs`) and spacing a person does not see: the first of each kind."""
    found: dict[str, Finding] = {}
    for start, end in runs:
        run = text[start:end]
        kinds = (
            ("tag_characters", _has_tags(run)),
            ("bidi_controls", not _BIDI.isdisjoint(run)),
            (
                "invisible_characters",
                any(char not in _BIDI and not _TAG_FIRST <= ord(char) <= _TAG_LAST for char in run),
            ),
        )
        for kind, present in kinds:
            if present and kind not in found:
                found[kind] = Finding(kind, where, _raw_excerpt(text, start, end))
        if len(found) == len(kinds):
            break
    padding = _padding(text)
    if padding is not None:
        start, end, shown = padding
        found["padding"] = Finding("padding", where, _raw_excerpt(text, start, end, shown))
    return list(found.values())


def _padding(text: str) -> tuple[int, int, str] | None:
    """Where a run of 40 blanks on a line, or of `_BLANK_LINES` blank lines, starts and ends, and what it is."""
    # The pattern search is slow next to a substring test, which rules out nearly every text.
    wide = _WIDE_GAP.search(text) if "    " in text or "\t" in text or not text.isascii() else None
    if wide is not None:
        return wide.start(), wide.end(), f"<{wide.end() - wide.start()} blanks>"
    if text.count("\n") < _BLANK_LINES:
        return None
    run, start, offset = 0, 0, 0
    for line in text.split("\n"):
        if line.strip():
            if run >= _BLANK_LINES:
                return start, offset, f"<{run} blank lines>"
            run = 0
        else:
            if run == 0:
                start = offset
            run += 1
        offset += len(line) + 1
    return (start, len(text), f"<{run} blank lines>") if run >= _BLANK_LINES else None


def _raw_excerpt(text: str, start: int, end: int, middle: str | None = None) -> str:
    """The text around `start:end` (shown as `middle` when given), hidden characters made visible."""
    before = visible(text[max(0, start - EXCERPT_CONTEXT) : start])
    after = visible(text[end : end + EXCERPT_CONTEXT])
    # A run can be the whole text: only as much of it is shown as an excerpt can hold.
    shown = visible(text[start : min(end, start + EXCERPT_CHARS)]) if middle is None else middle
    return _framed(text, start, end, before, shown, after)


def _excerpt(plain: str, start: int, end: int) -> str:
    """The readable text around a phrase found at `start:end`."""
    before = plain[max(0, start - EXCERPT_CONTEXT) : start]
    after = plain[end : end + EXCERPT_CONTEXT]
    return _framed(plain, start, end, before, plain[start:end], after)


def _framed(text: str, start: int, end: int, before: str, middle: str, after: str) -> str:
    lead = "…" if start > EXCERPT_CONTEXT else ""
    tail = "…" if end + EXCERPT_CONTEXT < len(text) else ""
    shown = " ".join(f"{lead}{before}{middle}{after}{tail}".split())
    return shown if len(shown) <= EXCERPT_CHARS else shown[: EXCERPT_CHARS - 1] + "…"


def _texts(tool: ToolRecord) -> Iterator[tuple[str, str]]:
    """Each piece of model-visible text of `tool` with where it is, in the order of the definition."""
    if tool.title:
        yield "title", tool.title
    if tool.description:
        yield "description", tool.description
    if tool.annotations is not None and tool.annotations.title:
        yield "annotations.title", tool.annotations.title
    yield from _schema_texts("input_schema", tool.input_schema)
    if tool.output_schema is not None:
        yield from _schema_texts("output_schema", tool.output_schema)


def _schema_texts(root: str, schema: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every key and string in a schema but JSON Schema's own words, each key before what it holds,
    without recursion (schemas are the upstream's to nest)."""
    # (where, a value to walk) or (where, None, a key to give as it is)
    stack: list[tuple[str, Any] | tuple[str, None, str]] = [(root, schema)]
    while stack:
        entry = stack.pop()
        if len(entry) == 3:
            yield entry[0], entry[2]
            continue
        path, value = entry
        if isinstance(value, str):
            if value not in _SCHEMA_WORDS:
                yield path, value
        elif isinstance(value, Mapping):
            children: list[tuple[str, Any] | tuple[str, None, str]] = []
            for key, child in value.items():
                name = str(key)
                where = f"{path}.{name if name.isascii() and name.isprintable() else visible(name)}"
                if name not in _SCHEMA_WORDS:
                    children.append((f"{where} (key)", None, name))
                children.append((where, child))
            stack.extend(reversed(children))
        elif isinstance(value, list | tuple):
            stack.extend(reversed([(f"{path}[{index}]", child) for index, child in enumerate(value)]))
