"""Upstreams whose names clash and whose results point at their resources, like server-everything:
in memory, or `python -m tests.support.linked [--partial]` over stdio."""

from __future__ import annotations

import argparse
from typing import Any

import mcp_types as types
from mcp.server import MCPServer, Server, ServerRequestContext

STATIC = "demo://resource/static/readme"
TEMPLATE = "demo://resource/dynamic/blob/{resource_id}"


def linking_server(name: str = "demo") -> MCPServer:
    """A server with `echo`, a `link` tool whose result links and embeds its resources, a static
    resource, a template, and a `hello` prompt; every text names the server."""
    server = MCPServer(name)

    @server.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Return the text with the server's name."""
        return f"{name}: {text}"

    @server.tool(structured_output=False)
    async def link(resource_id: str) -> list[types.ContentBlock]:
        """Point at a resource of the template and embed the static one."""
        uri = TEMPLATE.replace("{resource_id}", resource_id)
        readme = types.TextResourceContents(uri=STATIC, mime_type="text/plain", text=f"readme of {name}")
        return [
            types.TextContent(text="see the links"),
            types.ResourceLink(uri=uri, name=f"blob {resource_id}"),
            types.EmbeddedResource(resource=readme),
        ]

    @server.resource(STATIC, name="readme")
    def readme() -> str:
        return f"readme of {name}"

    @server.resource(TEMPLATE, name="blob")
    def blob(resource_id: str) -> str:
        return f"blob {resource_id} of {name}"

    @server.prompt()
    def hello(who: str) -> str:
        """Say hello."""
        return f"Hello {who} from {name}"

    return server


def partial_server(name: str = "partial") -> Server[Any]:
    """A server that declares resources but answers "Method not found" to resources/templates/list,
    as many third-party servers do."""

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        echo = types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
        return types.ListToolsResult(tools=[echo])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(text=f"{name}: {text}")])

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return types.ListResourcesResult(resources=[types.Resource(uri="partial://notes", name="notes")])

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="the notes")])

    return Server(
        name,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def main() -> None:
    """Run one of the servers over stdio."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.linked")
    parser.add_argument("--name", default="demo")
    parser.add_argument("--partial", action="store_true")
    args = parser.parse_args()
    if args.partial:
        import anyio
        from mcp.server.stdio import stdio_server

        server = partial_server(args.name)

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
    else:
        linking_server(args.name).run("stdio")


if __name__ == "__main__":
    main()
