"""`extends`: a configuration file built on another (the embedded defaults, or a file), merged section by section.

The merge rule (docs/configuration.md, "Extending another file"):
- `gateway`: key by key, the extending file's value wins; `skill_dirs` lists are joined, the base's first.
- `servers`: by name; a new name is added, a name in both has its keys merged one level deep (the
  extending file's keys win), so `calc: {enabled: false}` turns off a server of the base.
- `local_tools`: joined, the base's first.
- Every other section (`roles`, `auth`, `groups`, ...): the extending file's replaces the base's whole.

`${CONFIG_DIR}` in each file means that file's own directory; every other relative path is resolved
against the directory of the file the gateway was given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config.reader import read_config_file
from gateway.config.variables import pin_variable
from gateway.errors import ConfigError
from gateway.problems import describe_value

EXTENDS = "extends"
DEFAULT = "default"
CONFIG_DIR = "CONFIG_DIR"
_JOINED = ("local_tools",)


def extended(data: Any, source: str, base_dir: Path, default: Callable[[], Path]) -> Any:
    """`data` with the file its `extends` names merged under it (recursively); `data` as it is
    without `extends`. `default` finds the embedded defaults, which `extends: default` names."""
    return _extended(data, source, base_dir, default, (source,))


def _extended(data: Any, source: str, base_dir: Path, default: Callable[[], Path], chain: tuple[str, ...]) -> Any:
    if not isinstance(data, dict) or EXTENDS not in data:
        return data
    own = {key: value for key, value in data.items() if key != EXTENDS}
    named = data[EXTENDS]
    if not isinstance(named, str) or not named:
        raise ConfigError(source, EXTENDS, f"expected `default` or a file's path, got {describe_value(named)}")
    path = default() if named == DEFAULT else (base_dir / Path(named).expanduser()).absolute()
    if str(path) in chain:
        cycle = " -> ".join((*chain, str(path)))
        raise ConfigError(source, EXTENDS, f"files extend one another in a cycle: {cycle}")
    try:
        raw = read_config_file(path)
    except ConfigError as error:
        if error.path:
            raise
        # The file itself is missing or unreadable: said where it is named.
        raise ConfigError(source, EXTENDS, f"{named!r} ({path}) {error.problem}") from None
    if not isinstance(raw, dict):
        raise ConfigError(str(path), "", f"expected a map at the top level, got {describe_value(raw)}")
    if "mcpServers" in raw or "mcpServers" in own:
        raise ConfigError(source, EXTENDS, "only files in the gateway's own format extend or are extended")
    base = pin_variable(raw, CONFIG_DIR, str(path.parent))
    return merge(_extended(base, str(path), path.parent, default, (*chain, str(path))), own)


def merge(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """`own` laid over `base` by the module's merge rule; neither is changed."""
    merged = dict(base)
    for section, value in own.items():
        under = base.get(section)
        if section == "gateway" and isinstance(under, dict) and isinstance(value, dict):
            settings = {**under, **value}
            if isinstance(under.get("skill_dirs"), list) and isinstance(value.get("skill_dirs"), list):
                settings["skill_dirs"] = under["skill_dirs"] + value["skill_dirs"]
            merged[section] = settings
        elif section == "servers" and isinstance(under, dict) and isinstance(value, dict):
            servers = dict(under)
            for name, entry in value.items():
                old = under.get(name)
                servers[name] = {**old, **entry} if isinstance(old, dict) and isinstance(entry, dict) else entry
            merged[section] = servers
        elif section in _JOINED and isinstance(under, list) and isinstance(value, list):
            merged[section] = under + value
        else:
            merged[section] = value
    return merged
