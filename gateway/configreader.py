"""Reading a configuration file into parsed data: bounded in size, UTF-8, YAML or JSON, no key given twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gateway.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20


def read_config_file(path: Path) -> Any:
    """The parsed content of a file, bounded in size; every failure becomes a ConfigError."""
    source = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(source, "", "no such file") from None
    except IsADirectoryError:
        raise ConfigError(source, "", "is a directory, not a configuration file") from None
    except OSError as error:
        raise ConfigError(source, "", f"cannot be read: {error.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(source, "", f"is larger than {MAX_CONFIG_BYTES} bytes, the limit for a configuration file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(source, "", f"is not UTF-8 text (bad byte at offset {error.start})") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except json.JSONDecodeError as error:
            raise ConfigError(
                source, f"line {error.lineno}, column {error.colno}", f"JSON syntax error: {error.msg}"
            ) from None
        except ValueError as error:
            raise ConfigError(source, "", str(error)) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({error.context})" if error.context and error.problem else ""
        label = "" if isinstance(error, _DuplicateKeyError) else "YAML syntax error: "
        raise ConfigError(source, where, f"{label}{error.problem or error.context}{context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"YAML syntax error: {error}") from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (JSON parsers would keep only the last)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}; only one of them would take effect")
        result[key] = value
    return result


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """A YAML map gives the same key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one map instead of keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The map, after checking its own keys (merged `<<` keys may legitimately be overridden)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKeyError(
                    None, None, f"duplicate key {key!r}; only one of them would take effect", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
