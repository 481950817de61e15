"""An upstream that uses what a faithful proxy must pass on: server and tool icons, tool `_meta` with
an MCP Apps view (`ui://`, listed and not), prompts that embed and link resources, and a large
structured result. In memory, or `python -m tests.support.faithful` over stdio."""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import EmbeddedResource, Icon, ResourceLink, TextResourceContents, ToolAnnotations
from pydantic import BaseModel, Field

# A 16-pixel blue square.
ICON = Icon(
    src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAFklEQVR42mPgDr9AEmIY1TCqYfhqAADpbTIQSUZltQAAAABJRU5ErkJggg==",
    mime_type="image/png",
    sizes=["16x16"],
)
SERVER_ICON = Icon(src="https://example.com/faithful.svg", mime_type="image/svg+xml", theme="light")
VIEW = "ui://clock/view.html"
UNLISTED_VIEW = "ui://clock-hidden/view.html"
APP_MIME = "text/html;profile=mcp-app"
VIEW_CSP = {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]}
TOOL_META: dict[str, Any] = {
    "ui": {"resourceUri": VIEW, "visibility": ["model", "app"]},
    "ui/resourceUri": VIEW,
    "com.example/owner": {"team": "clocks", "tier": 2},
}
VIEW_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Clock view</title></head>
<body><p id="time">waiting for the host</p><p id="called">no call yet</p>
<script>
let next = 1;
const pending = {};
function send(method, params) {
  const id = next++;
  window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve) => { pending[id] = resolve; });
}
window.addEventListener("message", (event) => {
  const message = event.data || {};
  if (message.id !== undefined && pending[message.id]) { pending[message.id](message); return; }
  if (message.method === "ui/notifications/tool-result") {
    const result = message.params || {};
    document.getElementById("time").textContent = "rendered: " + ((result.structuredContent || {}).time || "?");
    // A view calls its own server's tools by the names that server gives them.
    send("tools/call", { name: "hidden_clock", arguments: {} }).then((reply) => {
      const time = reply.result ? (reply.result.structuredContent || {}).time : "error " + reply.error.message;
      document.getElementById("called").textContent = "called: " + time;
    });
  }
});
send("ui/initialize", { appInfo: { name: "clock", version: "1" }, appCapabilities: {}, protocolVersion: "2026-01-26" })
  .then(() => window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }, "*"));
</script></body></html>
"""


class Readings(BaseModel):
    """Readings a schema asks to be complete: a cut list would not match it."""

    values: list[float] = Field(min_length=1000)


def build_server(name: str = "faithful") -> MCPServer:
    """The server, with every one of those features."""
    server = MCPServer(name, title="Faithful", icons=[SERVER_ICON])

    @server.tool(
        title="Clock",
        annotations=ToolAnnotations(read_only_hint=True, title="The clock"),
        icons=[ICON],
        meta=TOOL_META,
    )
    async def clock() -> dict[str, str]:
        """The time, as an MCP App shows it."""
        return {"time": "12:00"}

    @server.tool(meta={"ui": {"resourceUri": UNLISTED_VIEW}})
    async def hidden_clock() -> dict[str, str]:
        """The time, shown by a view the server does not list."""
        return {"time": "12:01"}

    @server.tool(meta={"ui": {"resourceUri": VIEW, "visibility": ["model"]}})
    async def reset_clock() -> str:
        """Set the clock back; the model may call it, its view may not."""
        return "reset"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def report(rows: int, note_chars: int = 0) -> dict[str, Any]:
        """`rows` rows of figures and a note of `note_chars` characters."""
        return {
            "title": "Quarterly figures",
            "rows": [{"index": index, "label": f"row {index:05d}", "value": index * 1.5} for index in range(rows)],
            "note": "n" * note_chars,
        }

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def readings() -> Readings:
        """A thousand readings, all of which the output schema asks for."""
        return Readings(values=[index / 7 for index in range(1000)])

    @server.resource(VIEW, name="clock view", mime_type=APP_MIME, meta={"ui": {"csp": VIEW_CSP}})
    def view() -> str:
        return VIEW_HTML.replace("Clock view", f"Clock view of {name}")

    @server.resource("ui://{app}/view.html", name="views", mime_type=APP_MIME)
    def any_view(app: str) -> str:
        return VIEW_HTML.replace("Clock view", f"{app} view")

    @server.resource("faithful://notes/{topic}", name="note")
    def note(topic: str) -> str:
        return f"note about {topic}"

    @server.prompt()
    def briefing(topic: str) -> list[UserMessage]:
        """A briefing that embeds one note and links another."""
        embedded = TextResourceContents(uri=f"faithful://notes/{topic}", text=f"note about {topic}")
        link = ResourceLink(name="more", uri=f"faithful://notes/{topic}-more")
        return [
            UserMessage(f"Brief me on {topic}."),
            UserMessage(EmbeddedResource(resource=embedded)),
            UserMessage(link),
        ]

    return server


def main() -> None:
    """Run the server over stdio."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.faithful")
    parser.add_argument("--name", default="faithful")
    build_server(parser.parse_args().name).run("stdio")


if __name__ == "__main__":
    main()
