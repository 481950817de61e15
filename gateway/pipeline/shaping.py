"""Result shaping: oversized tool results are cut down before they reach a model's context.

Text is cut in the middle, keeping whole lines from the start and the end (a line too long
to keep whole is cut inside) with a marker saying how much was omitted. The text budget
counts across every text block (text content and embedded text resources); blocks smaller
than an even share keep all of it and the rest is shared among the larger ones. Images,
audio and embedded binary resources whose decoded size exceeds the byte cap are replaced by
a note.

`structured_content` is held to the same budget, as compact JSON, and keeps its shape: every key
stays, a long string is cut in the middle with the same marker, a long array keeps its first and
last items (`fit_json`). A text block that is the structured content written out as JSON (what
servers send beside it) becomes the cut structure written out the same way, so the two still
agree. A cut structure that would no longer match the tool's output schema is kept whole instead:
clients check it against that schema. What was cut is said twice: a text block at the end for the
model, and `_meta["io.mcp-gateway/shaped"]` for programs. `is_error` and the rest of `meta` are
kept as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, TypeVar

import jsonschema
import mcp_types as types
import pydantic_core
from referencing.exceptions import Unresolvable

from gateway.catalog.jsonschemas import SchemaCache
from gateway.pipeline.chain import CallNext, ToolCall

Block = types.TextContent | types.ImageContent | types.AudioContent | types.ResourceLink | types.EmbeddedResource

DEFAULT_MAX_TEXT_CHARS = 8000
DEFAULT_MAX_BINARY_BYTES = 1024 * 1024
SHAPED_KEY = "io.mcp-gateway/shaped"
"""The `_meta` key of a shaped result: characters before and kept, of its text and of its structured content."""
# Room a string keeps for the marker that replaces its middle, and how many cut places a note names.
MARKER_ROOM = 60
NAMED_CUTS = 5
SCHEMAS_KEPT = 256
Accepts = Callable[[Any], bool]
K = TypeVar("K")
# Made once: `json.dumps` with options builds an encoder per call, several times the cost of a small result.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class ShapeResult:
    """Pipeline step: shape every result with `shape_result`."""

    def __init__(
        self, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS, max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES
    ) -> None:
        self._max_text_chars = max_text_chars
        self._max_binary_bytes = max_binary_bytes
        self._schemas = SchemaCache(SCHEMAS_KEPT)

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run the call and shape its result, a cut structure held to the tool's output schema."""
        result = await call_next(call)
        schema = call.tool.output_schema
        accepts = None if schema is None else lambda value: self._accepts(schema, value)
        return shape_result(
            result, max_text_chars=self._max_text_chars, max_binary_bytes=self._max_binary_bytes, accepts=accepts
        )

    def _accepts(self, schema: Mapping[str, Any], value: Any) -> bool:
        try:
            compiled = self._schemas.get(schema)
            return compiled.accepts(value) or bool(compiled.validator.is_valid(value))
        except (jsonschema.SchemaError, Unresolvable):
            return False


def shape_result(
    result: types.CallToolResult,
    *,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
    accepts: Accepts | None = None,
) -> types.CallToolResult:
    """`result` within the limits; the very same object when nothing had to be cut. `accepts` says
    whether a cut structured content still matches the tool's output schema (None: it has none)."""
    content: list[Block] = [_cap_binary(block, max_binary_bytes) for block in result.content]
    sizes = {i: len(text) for i, block in enumerate(content) if (text := _text_of(block)) is not None}
    shares = _shares(sizes, max_text_chars) if sum(sizes.values()) > max_text_chars else {}
    structure = None
    if result.structured_content is not None:
        # Nested deeper than JSON is written, or an integer too long to write: it goes as it came.
        with suppress(RecursionError, ValueError):
            structure = _shape_structure(result.structured_content, content, shares, max_text_chars, accepts)
    for i, budget in shares.items():
        content[i] = _with_text(content[i], cut_text(_text_of(content[i]) or "", budget))
    if structure is None and all(new is old for new, old in zip(content, result.content, strict=True)):
        return result
    kept = sum(len(text) for block in content if (text := _text_of(block)) is not None)
    shaped: dict[str, Any] = {}
    if kept != sum(sizes.values()):
        shaped["content"] = {"chars": sum(sizes.values()), "kept": kept}
    update: dict[str, Any] = {"content": content}
    if structure is not None:
        update["structured_content"] = structure.value
        shaped["structuredContent"] = {"chars": structure.chars, "kept": structure.kept}
        content.append(types.TextContent(text=structure.note(max_text_chars)))
    if shaped:
        update["meta"] = {**(result.meta or {}), SHAPED_KEY: shaped}
    return result.model_copy(update=update)


class _Structure:
    """Structured content that was over the budget: as it goes out, how long it was and is, what was cut."""

    def __init__(self, value: Any, chars: int, cuts: list[str], whole: bool) -> None:
        self.value = value
        self.chars = chars
        self.kept = json_size(value)
        self.cuts = cuts
        self.whole = whole

    def note(self, budget: int) -> str:
        """The text block saying what happened to it."""
        if self.whole:
            return (
                f"[structured content of {self.chars:,} characters kept whole: cut to the {budget:,}-character "
                "limit it would no longer match the tool's output schema]"
            )
        named = ", ".join(self.cuts[:NAMED_CUTS])
        more = f" and {len(self.cuts) - NAMED_CUTS} more" if len(self.cuts) > NAMED_CUTS else ""
        return (
            f"[structured content cut to the {budget:,}-character limit: {self.kept:,} of {self.chars:,} "
            f"characters kept; cut: {named}{more}]"
        )


def _shape_structure(
    value: Any, content: list[Block], shares: dict[int, int], budget: int, accepts: Accepts | None
) -> _Structure | None:
    """Fit `value` (a result's structured content) to `budget`, or to the share of a text block that
    writes it out, that block then writing out the cut value (taken out of `shares`). None: it fits."""
    mirrors = [i for i in shares if _writes_out(_text_of(content[i]) or "", value)]
    if not mirrors and _surely_fits(value, budget):
        return None
    chars = json_size(value)
    if chars <= budget and not mirrors:
        return None
    target = min([budget, *(shares[i] for i in mirrors)])
    indent = 2 if any("\n" in (_text_of(content[i]) or "") for i in mirrors) else None
    fitted, cuts = fit_json(value, target)
    written = _written(fitted, indent)
    # Written out with indentation a structure is longer than compact: fit it again, smaller.
    for _ in range(3):
        if len(written) <= target or not mirrors:
            break
        fitted, cuts = fit_json(value, max(1, target * json_size(fitted) // len(written)))
        written = _written(fitted, indent)
    if cuts and accepts is not None and not accepts(fitted):
        return _Structure(value, chars, [], whole=True)
    for i in mirrors:
        content[i] = _with_text(content[i], written)
        del shares[i]
    # Nothing cut: only its written-out form was too long, and is now shorter.
    return _Structure(fitted, chars, cuts, whole=False) if cuts else None


def _writes_out(text: str, value: Any) -> bool:
    """Whether `text` is `value` written out as JSON."""
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):
        return False


def _written(value: Any, indent: int | None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _surely_fits(value: Any, budget: int) -> bool:
    """Whether `value` as compact JSON is within `budget`, told fast (False: measure it). pydantic's
    encoder (Rust) writes the same JSON as UTF-8, at least a byte per character, in a fifth of the time
    `json` takes for a small result; a value it refuses (a lone surrogate) is measured."""
    try:
        return len(pydantic_core.to_json(value)) <= budget
    except pydantic_core.PydanticSerializationError:
        return False


def json_size(value: Any) -> int:
    """Characters of `value` as compact JSON."""
    return len(_COMPACT.encode(value))


def fit_json(value: Any, budget: int) -> tuple[Any, list[str]]:
    """`value` (JSON data) with its compact JSON at about `budget` characters at most, and the paths
    of what was cut. Every key of an object stays; the budget is shared among its values as among
    text blocks; a string over its share is cut in the middle with a marker; an array of many items
    keeps whole items from both ends, one of few shares the budget among them. Numbers, booleans
    and null stay."""
    cuts: list[str] = []
    return _fit(value, budget, "$", cuts), cuts


def _fit(value: Any, budget: int, path: str, cuts: list[str]) -> Any:
    if isinstance(value, str):
        written = json_size(value)
        if written <= budget:
            return value
        # Escapes make a string longer written out (a newline is two characters): keep that much less of it.
        cut = cut_text(value, max(0, budget - 2 - MARKER_ROOM) * len(value) // written)
        if len(cut) >= len(value):
            return value  # a marker longer than what it would stand for
        cuts.append(path)
        return cut
    if isinstance(value, dict):
        return _fit_object(value, budget, path, cuts)
    if isinstance(value, list):
        return _fit_array(value, budget, path, cuts)
    return value


def _fit_object(value: dict[str, Any], budget: int, path: str, cuts: list[str]) -> dict[str, Any]:
    sizes = {key: json_size(item) for key, item in value.items()}
    keys = sum(json_size(key) + 1 for key in value) + max(0, len(value) - 1) + 2
    if keys + sum(sizes.values()) <= budget:
        return value
    fitted = dict(value)
    for key, share in _shares(sizes, max(0, budget - keys)).items():
        fitted[key] = _fit(value[key], share, f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]", cuts)
    return fitted


def _fit_array(value: list[Any], budget: int, path: str, cuts: list[str]) -> list[Any]:
    sizes = [json_size(item) for item in value]
    if not value or sum(sizes) + len(value) + 1 <= budget:
        return value
    room = budget - 2
    if len(value) * MARKER_ROOM * 2 <= room:
        # Few items: each keeps a share, as text blocks do.
        shares = _shares(dict(enumerate(sizes)), room - len(value) + 1)
        return [_fit(item, shares[i], f"{path}[{i}]", cuts) if i in shares else item for i, item in enumerate(value)]
    # Many: whole items from the start and the end, as many as fit, the middle dropped.
    head: list[int] = []
    tail: list[int] = []
    used = 0
    low, high = 0, len(value) - 1
    while low <= high:
        index = low if len(head) <= len(tail) else high
        if used + sizes[index] + 1 > room:
            break
        used += sizes[index] + 1
        if index == low:
            head.append(low)
            low += 1
        else:
            tail.append(high)
            high -= 1
    kept = head + tail[::-1] or [0]
    if len(kept) < len(value):
        cuts.append(f"{path} ({len(kept)} of {len(value)} items)")
    if not head:
        # Not even the first item fits whole: it is cut to the room.
        return [_fit(value[0], room, f"{path}[0]", cuts)]
    return [value[i] for i in kept]


def cut_text(text: str, budget: int) -> str:
    """`text` cut to about `budget` characters around a marker: whole first and last lines kept."""
    if len(text) <= budget:
        return text
    head = _head(text, budget // 2)
    tail_start = _tail_start(text, budget - budget // 2)
    omitted = text[len(head) : tail_start]
    lines = omitted.count("\n") + (0 if omitted.endswith("\n") else 1)
    marker = f"[... {len(omitted):,} characters ({lines:,} line{'s' if lines != 1 else ''}) omitted ...]"
    before = "" if not head or head.endswith("\n") else "\n"
    after = "\n" if tail_start < len(text) else ""
    return f"{head}{before}{marker}{after}{text[tail_start:]}"


def _head(text: str, budget: int) -> str:
    """The longest run of whole lines within `budget`, or a cut first line if none fits."""
    end = 0
    while (newline := text.find("\n", end, budget)) != -1:
        end = newline + 1
    return text[: end or budget]


def _tail_start(text: str, budget: int) -> int:
    """Where the longest run of whole last lines within `budget` starts (inside a line if none fits)."""
    lowest = len(text) - budget
    if text[lowest - 1] == "\n":
        return lowest
    newline = text.find("\n", lowest, len(text) - 1)
    return lowest if newline == -1 else newline + 1


def _shares(sizes: dict[K, int], budget: int) -> dict[K, int]:
    """Max-min fair split of `budget`: small blocks whole, the rest shared evenly by the large ones."""
    shares: dict[K, int] = {}
    left = budget
    ordered = sorted(sizes.items(), key=lambda item: item[1])
    for position, (index, size) in enumerate(ordered):
        even = left // (len(ordered) - position)
        if size > even:
            shares[index] = even
            left -= even
        else:
            left -= size
    return shares


def _text_of(block: Block) -> str | None:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents):
        return block.resource.text
    return None


def _with_text(block: Block, text: str) -> Block:
    if isinstance(block, types.EmbeddedResource):
        return block.model_copy(update={"resource": block.resource.model_copy(update={"text": text})})
    return block.model_copy(update={"text": text})


def _cap_binary(block: Block, limit: int) -> Block:
    """`block` itself, or a text note when its decoded payload is larger than `limit` bytes."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        size = decoded_size(block.data)
        what = f"{block.mime_type} {block.type}"
    elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
        size = decoded_size(block.resource.blob)
        what = f"{block.resource.mime_type or 'binary'} resource {block.resource.uri}"
    else:
        return block
    if size <= limit:
        return block
    return types.TextContent(
        text=f"[{what} of {size:,} bytes dropped: larger than the {limit:,}-byte limit for one result]"
    )


def decoded_size(data: str) -> int:
    """Bytes that the base64 string `data` decodes to, computed without decoding it."""
    stripped = data.rstrip()
    return len(stripped) * 3 // 4 - stripped[-2:].count("=")
