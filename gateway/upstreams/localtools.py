"""Local Python tools: plain functions the operator registers, described from their signatures.

A function becomes a tool either by reference (`"pkg.mod:function"` in the configuration) or
by the `@tool` decorator in a module the configuration names. Its input schema, and the conversion
of the arguments to the declared types, come from the SDK's function metadata (pydantic, as for
`MCPServer` tools); its description and per-parameter descriptions from the docstring (Google
`Args:` sections or reST `:param x:` fields).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
import types as pytypes
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar, overload

import anyio
import mcp_types as types
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from pydantic import ValidationError

from gateway.catalog.tools import ToolRecord
from gateway.config.model import LocalToolConfig
from gateway.errors import GatewayError, ToolError, ToolExecutionError, ToolInputError, describe_error
from gateway.pipeline.chain import ProgressFn

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__gateway_tool__"


class LocalToolError(GatewayError):
    """A local tool cannot be loaded or described (names the reference or function)."""


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What `@tool(...)` declares about a function; becomes its MCP annotations."""

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    def annotations(self) -> types.ToolAnnotations | None:
        """The MCP annotations, or None when nothing was declared."""
        if self == ToolOptions():
            return None
        return types.ToolAnnotations(
            title=self.title,
            read_only_hint=self.read_only,
            destructive_hint=self.destructive,
            idempotent_hint=self.idempotent,
            open_world_hint=self.open_world,
        )


@overload
def tool(function: F, /) -> F: ...
@overload
def tool(
    *,
    title: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> Callable[[F], F]: ...
def tool(
    function: F | None = None,
    /,
    *,
    title: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
) -> F | Callable[[F], F]:
    """Mark a function as a local tool, as `@tool` or `@tool(read_only=True, ...)`; it stays callable."""
    options = ToolOptions(title, read_only, destructive, idempotent, open_world)

    def mark(target: F) -> F:
        setattr(target, _MARK, options)
        return target

    return mark if function is None else mark(function)


def load_reference(reference: str) -> Callable[..., Any]:
    """The function named by `"pkg.mod:function"`; `LocalToolError` naming the reference if not."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise LocalToolError(f"Local tool reference '{reference}': expected 'module:function'")
    module = _import(module_name, f"Local tool reference '{reference}'")
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise LocalToolError(f"Local tool reference '{reference}': module '{module_name}' has no '{part}'")
    if not callable(target):
        raise LocalToolError(f"Local tool reference '{reference}': not a function")
    function: Callable[..., Any] = target
    return function


def load_module_tools(module_name: str) -> list[Callable[..., Any]]:
    """Every function in `module_name` marked with `@tool`, in definition order."""
    module = _import(module_name, f"Local tool module '{module_name}'")
    return [value for value in vars(module).values() if callable(value) and hasattr(value, _MARK)]


def _import(module_name: str, what: str) -> pytypes.ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as error:
        # Anything can go wrong while importing operator code; say which reference it was.
        raise LocalToolError(f"{what}: cannot import '{module_name}': {describe_error(error)}") from None


def tool_record(function: Callable[..., Any], source: str = "local") -> ToolRecord:
    """The `ToolRecord` of a local function, named after it until the catalog gives its exposed name."""
    return _record(function, Parameters.of(function), source)


def _record(function: Callable[..., Any], parameters: Parameters, source: str) -> ToolRecord:
    name = getattr(function, "__name__", type(function).__name__)
    options: ToolOptions = getattr(function, _MARK, ToolOptions())
    summary, param_docs = parse_docstring(inspect.getdoc(function) or "")
    return ToolRecord(
        name=name,
        source=source,
        original_name=name,
        description=summary,
        input_schema=parameters.schema(param_docs),
        title=options.title,
        annotations=options.annotations(),
    )


@dataclass(frozen=True, slots=True)
class Parameters:
    """A local function's parameters, as the SDK's argument model (the one `MCPServer` tools use).

    `json_schema` is the model's JSON Schema, undescribed; `rest` says whether the function takes
    `**kwargs`, which then receive the arguments it does not name.
    """

    model: FuncMetadata
    json_schema: dict[str, Any]
    rest: bool

    @classmethod
    def of(cls, function: Callable[..., Any]) -> Parameters:
        """The parameters of `function`; `LocalToolError` naming it when they cannot be described."""
        name = getattr(function, "__name__", type(function).__name__)
        rest: list[str] = []
        for param in inspect.signature(function).parameters.values():
            if param.kind is param.VAR_KEYWORD:
                rest.append(param.name)
            elif param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
                raise LocalToolError(f"Local tool '{name}': parameter '{param.name}' cannot be passed by name")
        try:
            model = func_metadata(function, skip_names=rest, structured_output=False)
            schema = model.arg_model.model_json_schema(by_alias=True)
        except Exception as error:
            # Operator code can hold any hint; say which function could not be described, and why.
            raise LocalToolError(
                f"Local tool '{name}': cannot describe its parameters: {describe_error(error)}"
            ) from None
        # The gateway validates arguments against this schema, so a misspelt one is refused, not dropped.
        schema["additionalProperties"] = bool(rest)
        return cls(model, schema, bool(rest))

    def schema(self, descriptions: Mapping[str, str]) -> dict[str, Any]:
        """The JSON Schema of the arguments, each parameter described by its entry in `descriptions`."""
        properties = {
            name: {**schema, "description": descriptions[name]} if name in descriptions else schema
            for name, schema in self.json_schema.get("properties", {}).items()
        }
        return {**self.json_schema, "properties": properties}

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of a call, converted to the declared types (enums, dates, ...).

        Raises pydantic's `ValidationError` when an argument does not fit its type.
        """
        kwargs = self.model.validate_arguments(dict(arguments))
        if self.rest:
            kwargs.update((key, value) for key, value in arguments.items() if key not in kwargs)
        return kwargs


_ARG_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"})
_OTHER_SECTIONS = frozenset(
    {"Returns", "Return", "Yields", "Yield", "Raises", "Example", "Examples", "Note", "Notes", "Warning"}
    | {"Warnings", "See Also", "Todo", "Attributes", "Other Parameters"}
)
_HEADER = re.compile(r"^([A-Z][a-z]+(?: [A-Z][a-z]+)?):\s*$")
_GOOGLE_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_FIELD = re.compile(r"^:[^:]+:")
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (the text before the first section) and the per-parameter descriptions."""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None  # None while still in the description, else "args", "field" or "other"
    current: str | None = None
    item_indent: int | None = None
    for line in doc.expandtabs().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _HEADER.match(line)
        if header and header.group(1) in _ARG_SECTIONS | _OTHER_SECTIONS:
            section = "args" if header.group(1) in _ARG_SECTIONS else "other"
            current, item_indent = None, None
        elif indent == 0 and _REST_FIELD.match(stripped):
            section = "field"
            field = _REST_PARAM.match(stripped)
            current = field.group(1) if field else None
            if field:
                params[field.group(1)] = field.group(2)
        elif section is None:
            description.append(line)
        elif not stripped:
            current = current if section == "args" else None
        elif section == "args" and indent <= (item_indent := item_indent or indent):
            arg = _GOOGLE_ARG.match(stripped)
            current = arg.group(1) if arg else None
            if arg:
                params[arg.group(1)] = arg.group(2)
        elif current is not None and indent > 0:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(description).strip(), params


def local_sources(entries: Iterable[LocalToolConfig]) -> dict[str, LocalToolSource]:
    """One source per namespace for the configured local tools, each tool with its entry's layer, timeout, tags."""
    functions: dict[str, list[Callable[..., Any]]] = {}
    settings: dict[str, dict[str, LocalToolConfig]] = {}
    for entry in entries:
        found = [load_reference(entry.ref)] if ":" in entry.ref else load_module_tools(entry.ref)
        functions.setdefault(entry.namespace, []).extend(found)
        settings.setdefault(entry.namespace, {}).update((function.__name__, entry) for function in found)
    return {namespace: LocalToolSource(found, namespace, settings[namespace]) for namespace, found in functions.items()}


class LocalToolSource:
    """A `ToolSource` running registered Python functions in-process.

    `settings` gives, by function name, the configuration entry that registered it.
    """

    def __init__(
        self,
        functions: Iterable[Callable[..., Any]],
        source: str = "local",
        settings: Mapping[str, LocalToolConfig] | None = None,
    ) -> None:
        self.source = source
        self._functions: dict[str, tuple[Callable[..., Any], Parameters]] = {}
        for function in functions:
            name = getattr(function, "__name__", "")
            if name in self._functions:
                raise LocalToolError(f"Local tools: two functions are named '{name}' in source '{source}'")
            self._functions[name] = (function, Parameters.of(function))
        self.records = [
            _configured(_record(function, parameters, source), (settings or {}).get(name))
            for name, (function, parameters) in self._functions.items()
        ]

    async def call_tool(
        self, tool: ToolRecord, arguments: Mapping[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        """Run the function behind `tool`; what it raises comes back as `ToolExecutionError`.

        The function's own exceptions are translated here, where they are known to be the
        tool's: an `OSError` it raises (a missing file) must not pass for a broken connection
        further up, which would retry a read-only tool and blame an unreachable server.
        """
        found = self._functions.get(tool.original_name)
        if found is None:
            raise ToolExecutionError(f"Local source '{self.source}' has no function '{tool.original_name}'")
        function, parameters = found
        try:
            kwargs = parameters.bind(arguments)
        except ValidationError as error:
            listing = "\n".join(f"- $.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ToolInputError(f"Invalid arguments for tool '{tool.name}':\n{listing}") from None
        try:
            if inspect.iscoroutinefunction(function):
                value = await function(**kwargs)
            else:
                # Abandoned on cancel so the call's deadline holds even if the function never returns.
                value = await anyio.to_thread.run_sync(functools.partial(function, **kwargs), abandon_on_cancel=True)
        except ToolError:
            raise
        except Exception as error:
            raise ToolExecutionError(f"Tool '{tool.name}' failed: {describe_error(error)}") from None
        return to_result(value)


def _configured(record: ToolRecord, entry: LocalToolConfig | None) -> ToolRecord:
    if entry is None:
        return record
    return replace(record, layer=entry.layer, timeout=entry.timeout, tags=frozenset(entry.tags))


def to_result(value: Any) -> types.CallToolResult:
    """A function's return value as a tool result."""
    if isinstance(value, types.CallToolResult):
        return value
    if value is None:
        return types.CallToolResult(content=[types.TextContent(text="")])
    if isinstance(value, str):
        return types.CallToolResult(content=[types.TextContent(text=value)])
    text = json.dumps(value, ensure_ascii=False, default=str)
    content: list[types.ContentBlock] = [types.TextContent(text=text)]
    if isinstance(value, dict | list):
        # Read back from the text so values like datetimes are the same plain JSON in both places;
        # structured content must be an object, so a list travels under "result".
        structured = json.loads(text)
        return types.CallToolResult(
            content=content, structured_content=structured if isinstance(value, dict) else {"result": structured}
        )
    return types.CallToolResult(content=content)
