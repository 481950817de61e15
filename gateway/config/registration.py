"""What may be registered through the API: the `registration` section and its checks (pure).

Registering a stdio server runs a command on the gateway's host, so nothing may be registered
until the operator says what: `allow_commands` globs are matched against the executable's path
and against its name, `allow_urls` globs against the whole URL. In a glob `*` stays inside one
part (it matches no `/`, `?`, `#`, `@` or `:`), so `https://*.example.com/**` cannot be met by
`https://evil.test/?.example.com/`; `**` matches anything, `?` one character of a part.
`sandbox_stdio` (default true) runs every API-registered stdio server in a Docker sandbox unless
its entry says how it is sandboxed; a `docker` command must be the hardened run of
`gateway/config/dockerrun.py`, a container already, and is not wrapped again.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from gateway.config.dockerrun import run_problems
from gateway.config.schema import raise_if_any, validate_section
from gateway.errors import ForbiddenError, clip

REGISTRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "allow_commands": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "allow_urls": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "sandbox_stdio": {"type": "boolean"},
    },
}
"""The JSON Schema of the `registration` section."""

# What `*` may not cross: a path separator, and the characters that end or redirect a URL's host.
_PART = r"[^/?#@:]"


@cache
def _compiled(glob: str) -> re.Pattern[str]:
    """A glob as a regular expression: `**` anything, `*` within one part, `?` one character of a part."""
    pieces = re.split(r"(\*\*|\*|\?)", glob)
    wild = {"**": ".*", "*": f"{_PART}*", "?": _PART}
    return re.compile("".join(wild.get(piece, re.escape(piece)) for piece in pieces))


def glob_match(text: str, glob: str) -> bool:
    """Whether `text` matches `glob` in the registration policy's glob language (module docstring)."""
    return _compiled(glob).fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class RegistrationPolicy:
    """The `registration` section: which commands and URLs the API may register, and sandboxing."""

    allow_commands: tuple[str, ...] = ()
    allow_urls: tuple[str, ...] = ()
    sandbox_stdio: bool = True

    @classmethod
    def from_config(cls, raw: Any, *, source_file: str) -> RegistrationPolicy:
        """The policy of a `registration` section (the defaults when absent); raises `ConfigError`."""
        if raw is None:
            return cls()
        validate_section(raw, REGISTRATION_SCHEMA, section="registration", source_file=source_file)
        return cls(
            allow_commands=tuple(raw.get("allow_commands", ())),
            allow_urls=tuple(raw.get("allow_urls", ())),
            sandbox_stdio=raw.get("sandbox_stdio", True),
        )

    def command_allowed(self, command: str) -> bool:
        """Whether an executable may be registered: a glob matches its normalised path or its name."""
        path = posixpath.normpath(command) if "/" in command else command
        name = posixpath.basename(path)
        return any(glob_match(path, glob) or glob_match(name, glob) for glob in self.allow_commands)

    def url_allowed(self, url: str) -> bool:
        """Whether an endpoint may be registered: a glob matches the whole URL."""
        return any(glob_match(url, glob) for glob in self.allow_urls)

    def admit(self, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        """`entry` as it may be registered (sandboxed when the policy says so). `ForbiddenError` names
        what the policy refuses, `ConfigProblems` each argument of a `docker` command that is not the
        hardened run."""
        command, url = entry.get("command"), entry.get("url")
        # A variable could expand to any executable after the check; only literal commands are judged.
        if isinstance(command, str) and ("${" in command or not self.command_allowed(command)):
            raise ForbiddenError(
                f"server {name!r}: the command {clip(command)!r} is not allowed by registration.allow_commands"
            )
        if isinstance(url, str) and ("${" in url or not self.url_allowed(url)):
            raise ForbiddenError(f"server {name!r}: the URL {clip(url)!r} is not allowed by registration.allow_urls")
        admitted = dict(entry)
        container = isinstance(command, str) and posixpath.basename(command) == "docker"
        if container:
            problems = run_problems(entry.get("args", []), entry.get("env", {}))
            raise_if_any("registration", [(("servers", name, *where), text) for where, text in problems])
        if isinstance(command, str) and self.sandbox_stdio and not container and "sandbox" not in admitted:
            admitted["sandbox"] = "docker"
        return admitted
