"""Result shaping: oversized tool results are cut down before they reach a model's context.

Text is cut in the middle, keeping whole lines from the start and the end (a line too long
to keep whole is cut inside) with a marker saying how much was omitted. The text budget
counts across every text block (text content and embedded text resources); blocks smaller
than an even share keep all of it and the rest is shared among the larger ones. Images,
audio and embedded binary resources whose decoded size exceeds the byte cap are replaced by
a note. `structured_content`, `is_error` and `meta` are kept as they are.
"""

from __future__ import annotations

import mcp_types as types

from gateway.pipeline.chain import CallNext, ToolCall

Block = types.TextContent | types.ImageContent | types.AudioContent | types.ResourceLink | types.EmbeddedResource

DEFAULT_MAX_TEXT_CHARS = 8000
DEFAULT_MAX_BINARY_BYTES = 1024 * 1024


class ShapeResult:
    """Pipeline step: shape every result with `shape_result`."""

    def __init__(
        self, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS, max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES
    ) -> None:
        self._max_text_chars = max_text_chars
        self._max_binary_bytes = max_binary_bytes

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run the call and shape its result."""
        result = await call_next(call)
        return shape_result(result, max_text_chars=self._max_text_chars, max_binary_bytes=self._max_binary_bytes)


def shape_result(
    result: types.CallToolResult,
    *,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
) -> types.CallToolResult:
    """`result` within the limits; the very same object when nothing had to be cut."""
    content: list[Block] = [_cap_binary(block, max_binary_bytes) for block in result.content]
    sizes = {i: len(text) for i, block in enumerate(content) if (text := _text_of(block)) is not None}
    if sum(sizes.values()) > max_text_chars:
        for i, budget in _shares(sizes, max_text_chars).items():
            content[i] = _with_text(content[i], cut_text(_text_of(content[i]) or "", budget))
    if all(new is old for new, old in zip(content, result.content, strict=True)):
        return result
    return result.model_copy(update={"content": content})


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


def _shares(sizes: dict[int, int], budget: int) -> dict[int, int]:
    """Max-min fair split of `budget`: small blocks whole, the rest shared evenly by the large ones."""
    shares: dict[int, int] = {}
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
