"""Reading a configuration file into parsed data: bounded in size, UTF-8, YAML or JSON, no key given twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gateway.errors import ConfigError
from gateway.problems import MAX_DEPTH

MAX_CONFIG_BYTES = 1 << 20
# Aliases let a small file stand for a huge document ("billion laughs"); no real configuration nears this.
MAX_VALUES = 100_000
# Python refuses to read decimal integers of more than 4300 digits; no setting needs more than a few.
MAX_NUMBER_CHARS = 100
_TAG = "tag:yaml.org,2002:"
# What JSON can say, plus the merge key (`<<: *defaults`); dates, binary and sets are refused.
_JSON_TAGS = frozenset(_TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge"))
_DEPTH_PROBLEM = f"lists and maps are nested more than {MAX_DEPTH} levels deep"


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
            return json.loads(text, object_pairs_hook=unique_pairs)
        except json.JSONDecodeError as error:
            raise ConfigError(
                source, f"line {error.lineno}, column {error.colno}", f"JSON syntax error: {error.msg}"
            ) from None
        except ValueError as error:
            raise ConfigError(source, "", str(error)) from None
        except RecursionError:
            raise ConfigError(source, "", _DEPTH_PROBLEM) from None
    try:
        return _load_yaml(text, source)
    except RecursionError:
        raise ConfigError(source, "", _DEPTH_PROBLEM) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({error.context})" if error.context and error.problem else ""
        label = "" if isinstance(error, _DuplicateKeyError) else "YAML syntax error: "
        raise ConfigError(source, where, f"{label}{error.problem or error.context}{context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"YAML syntax error: {error}") from None


def _load_yaml(text: str, source: str) -> Any:
    """The YAML document in `text`, its shape checked before any value is built from it."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, 0, {}, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _measure(node: yaml.Node, depth: int, seen: dict[int, tuple[int, int]], source: str) -> tuple[int, int]:
    """(values, height) of `node` with aliases expanded; ConfigError when too many, too deep, or not JSON.

    An alias is the same node object reached twice, so `seen` measures it once; an alias of an
    enclosing node never finishes measuring and is stopped by the depth limit.
    """
    mark = node.start_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    if depth > MAX_DEPTH:
        raise ConfigError(source, where, f"{_DEPTH_PROBLEM} (or an alias refers to a map or list that holds it)")
    known = seen.get(id(node))
    if known is None:
        if node.tag not in _JSON_TAGS:
            tag = node.tag.replace(_TAG, "!!")
            raise ConfigError(source, where, f"{tag} values are not supported (only what JSON says); quote the value")
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _TAG + "int" and len(node.value) > MAX_NUMBER_CHARS:
                raise ConfigError(source, where, f"a number longer than {MAX_NUMBER_CHARS} characters")
            known = (1, 0)
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
            measured = [_measure(child, depth + 1, seen, source) for child in children]
            known = (1 + sum(size for size, _ in measured), 1 + max((height for _, height in measured), default=0))
        if known[0] > MAX_VALUES:
            raise ConfigError(source, where, f"aliases expand this to more than {MAX_VALUES} values")
        seen[id(node)] = known
    if depth + known[1] > MAX_DEPTH:
        raise ConfigError(source, where, _DEPTH_PROBLEM)
    return known


class DuplicateKeyError(ValueError):
    """A JSON object gives the same key twice."""


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (JSON parsers would keep only the last):
    the `object_pairs_hook` of every JSON the gateway reads from people (files, API bodies)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(f"duplicate key {key!r}; only one of them would take effect")
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
