"""`python -m tests.support.answers [--cancelled FILE]`: a low-level stdio server whose answers a
test chooses, for the gateway's direct path of a plain call.

`echo(text)` answers its text; `shaped(n)` declares an output schema (`n`, an integer) and answers
`{"n": n}` whatever `n` is, so a test can have it break its own schema; `hang()` waits until
cancelled and then writes the file named by `--cancelled`; `refuse()` answers a JSON-RPC error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SHAPE = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [
    types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}}),
    types.Tool(name="shaped", input_schema={"type": "object"}, output_schema=SHAPE),
    types.Tool(name="hang", input_schema={"type": "object"}),
    types.Tool(name="refuse", input_schema={"type": "object"}),
]


def build_server(cancelled: Path | None) -> Server[Any]:
    """The server; `cancelled` is the file `hang` writes once cancelled."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == "shaped":
            value = arguments.get("n")
            return types.CallToolResult(content=[types.TextContent(text=str(value))], structured_content={"n": value})
        if params.name == "hang":
            try:
                await anyio.sleep_forever()
            finally:
                if cancelled is not None:
                    with anyio.CancelScope(shield=True):
                        await anyio.Path(cancelled).write_text("cancelled")
        if params.name == "refuse":
            raise MCPError(code=types.INVALID_PARAMS, message="refused on purpose")
        return types.CallToolResult(content=[types.TextContent(text=str(arguments.get("text")))])

    return Server("answers", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(cancelled: Path | None) -> None:
    """Serve over stdin and stdout until the client goes."""
    server = build_server(cancelled)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    """Parse `--cancelled` and serve."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--cancelled", type=Path)
    anyio.run(serve, parser.parse_args().cancelled)


if __name__ == "__main__":
    main()
