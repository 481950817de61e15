"""The reference server of the conformance run: every tool, resource and prompt the official server
suite (`@modelcontextprotocol/conformance`, server side) calls by name, over streamable HTTP.

It mirrors the suite's own TypeScript "everything" example, written with the SDK's low-level `Server`
so that listings carry exactly the schemas the suite inspects. Run it with
`python -m tests.support.conformance_server --port P`; scripts/conformance starts it directly and as
a gateway's upstream, and the suite judges both.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import warnings
import wave
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

Context = ServerRequestContext[Any, Any]

# A 1x1 PNG and a short silent WAV: the suite checks content types and that data is base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _silent_wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        sound.writeframes(b"\x00\x00" * 80)
    return base64.b64encode(buffer.getvalue()).decode()


WAV = _silent_wav()
# The suite's own reference server pauses this long between the log messages and progress reports
# of one call; a gateway may pass such reports on at a bounded rate.
STEP_PAUSE = 0.05
EMPTY: dict[str, Any] = {"type": "object", "properties": {}}
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
DEFAULTS_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}
ENUMS_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _string_arguments(**described: str) -> dict[str, Any]:
    properties = {name: {"type": "string", "description": text} for name, text in described.items()}
    return {"type": "object", "properties": properties, "required": list(described)}


async def _simple_text(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return _text("This is a simple text response for testing.")


async def _image(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.ImageContent(data=PNG, mime_type="image/png")])


async def _audio(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.AudioContent(data=WAV, mime_type="audio/wav")])


def _embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text))


async def _embedded_resource(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    resource = _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    return types.CallToolResult(content=[resource])


async def _multiple_content_types(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    data = json.dumps({"test": "data", "value": 123})
    return types.CallToolResult(
        content=[
            types.TextContent(text="Multiple content types test:"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            _embedded("test://mixed-content-resource", "application/json", data),
        ]
    )


async def _with_logging(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    for index, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if index:
            await anyio.sleep(STEP_PAUSE)
        await ctx.session.send_log_message("info", message, related_request_id=ctx.request_id)
    return _text("Tool with logging executed successfully")


async def _with_progress(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    for step in (0, 50, 100):
        if step:
            await anyio.sleep(STEP_PAUSE)
        await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
    token = (ctx.meta or {}).get("progress_token", 0)
    return _text(str(token))


async def _error(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text="This tool intentionally returns an error for testing")], is_error=True
    )


async def _sampling(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=str(arguments.get("prompt", ""))))
    result = await ctx.session.create_message([message], max_tokens=100, related_request_id=ctx.request_id)
    content = result.content
    answer = content.text if isinstance(content, types.TextContent) else "No response"
    return _text(f"LLM response: {answer}")


async def _elicit(ctx: Context, message: str, schema: dict[str, Any], label: str) -> types.CallToolResult:
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return _text(f"{label}: action={result.action}, content={json.dumps(result.content or {})}")


async def _elicitation(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return await _elicit(ctx, str(arguments.get("message", "")), schema, "User response")


async def _elicitation_defaults(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    message = "Please review and update the form fields with defaults"
    return await _elicit(ctx, message, DEFAULTS_FORM, "Elicitation completed")


async def _elicitation_enums(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return await _elicit(ctx, "Please select options from the enum fields", ENUMS_FORM, "Elicitation completed")


async def _json_schema_2020_12(ctx: Context, arguments: dict[str, Any]) -> types.CallToolResult:
    return _text(f"JSON Schema 2020-12 tool called with: {json.dumps(arguments)}")


ToolHandler = Callable[[Context, dict[str, Any]], Awaitable[types.CallToolResult]]
TOOLS: dict[str, tuple[str, dict[str, Any], ToolHandler]] = {
    "test_simple_text": ("Tests simple text content response", EMPTY, _simple_text),
    "test_image_content": ("Tests image content response", EMPTY, _image),
    "test_audio_content": ("Tests audio content response", EMPTY, _audio),
    "test_embedded_resource": ("Tests embedded resource content response", EMPTY, _embedded_resource),
    "test_multiple_content_types": ("Tests response with text, image and resource", EMPTY, _multiple_content_types),
    "test_tool_with_logging": ("Tests tool that emits log messages during execution", EMPTY, _with_logging),
    "test_tool_with_progress": ("Tests tool that reports progress notifications", EMPTY, _with_progress),
    "test_error_handling": ("Tests error response handling", EMPTY, _error),
    "test_sampling": (
        "Tests server-initiated sampling (LLM completion request)",
        _string_arguments(prompt="The prompt to send to the LLM"),
        _sampling,
    ),
    "test_elicitation": (
        "Tests server-initiated elicitation (user input request)",
        _string_arguments(message="The message to show the user"),
        _elicitation,
    ),
    "test_elicitation_sep1034_defaults": ("Tests elicitation with default values", EMPTY, _elicitation_defaults),
    "test_elicitation_sep1330_enums": ("Tests elicitation with enum schema variants", EMPTY, _elicitation_enums),
    "json_schema_2020_12_tool": ("Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12, _json_schema_2020_12),
}

STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "Watched resource content"
RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", title="Static Text Resource", mime_type="text/plain"),
    types.Resource(
        uri="test://static-binary", name="static-binary", title="Static Binary Resource", mime_type="image/png"
    ),
    types.Resource(
        uri="test://watched-resource", name="watched-resource", title="Watched Resource", mime_type="text/plain"
    ),
]
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"

PROMPTS = [
    types.Prompt(
        name="test_simple_prompt", title="Simple Test Prompt", description="A simple prompt without arguments"
    ),
    types.Prompt(
        name="test_prompt_with_arguments",
        title="Prompt With Arguments",
        description="A prompt with required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        title="Prompt With Embedded Resource",
        description="A prompt that includes an embedded resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", title="Prompt With Image", description="A prompt with image content"),
]


async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tools = [
        types.Tool(name=name, description=description, input_schema=schema)
        for name, (description, schema, _) in TOOLS.items()
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
    entry = TOOLS.get(params.name)
    if entry is None:
        return types.CallToolResult(content=[types.TextContent(text=f"Unknown tool: {params.name}")], is_error=True)
    return await entry[2](ctx, dict(params.arguments or {}))


async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template=f"{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}",
        name="template",
        title="Resource Template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == "test://static-text":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=WATCHED_TEXT)
    elif uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        item = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
        text = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
    else:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}")
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def _user(content: types.TextContent | types.ImageContent | types.EmbeddedResource) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    arguments = params.arguments or {}
    if params.name == "test_simple_prompt":
        messages = [_user(types.TextContent(text="This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{arguments.get('arg1')}', arg2='{arguments.get('arg2')}'"
        messages = [_user(types.TextContent(text=text))]
    elif params.name == "test_prompt_with_embedded_resource":
        uri = arguments.get("resourceUri", "test://example-resource")
        messages = [
            _user(_embedded(uri, "text/plain", "Embedded resource content for testing.")),
            _user(types.TextContent(text="Please process the embedded resource above.")),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [
            _user(types.ImageContent(data=PNG, mime_type="image/png")),
            _user(types.TextContent(text="Please analyze the image above.")),
        ]
    else:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    await ctx.session.send_log_message("info", f"Log level set to: {params.level}", related_request_id=ctx.request_id)
    return types.EmptyResult()


def build_server() -> Server[Any]:
    """The reference server; the suite exercises logging, which the 2026-07-28 revision deprecates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "mcp-conformance-test-server",
            version="1.0.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_level,
        )


def main() -> None:
    """Serve the reference server over streamable HTTP on loopback."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()
    # Sampling, elicitation and logging are what the suite checks, though 2026-07-28 deprecates them.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    app = build_server().streamable_http_app(streamable_http_path="/mcp")
    uvicorn.run(app, host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
