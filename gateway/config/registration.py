"""What may be registered through the API: the `registration` section and its checks.

Registering a stdio server runs a command on the gateway's host, so nothing may be registered
until the operator says what. `allow_commands` holds program names and path globs, and judges the
absolute path a command would run: a program name is looked up on the gateway's PATH when the
policy is made and pinned to the path found there; a registered command is looked up the same way
(a path must be absolute) and must be a pinned path or match a path glob. A registered server that
runs on the host runs that absolute path, so neither a later PATH nor the entry's own `env` can
swap the program (in a path glob `*` stays inside one part, `**` matches anything, `?` one
character of a part). `allow_urls` holds URL patterns (`gateway.config.urls`): a URL is read
strictly and matched part by part, and the addresses its host resolves to are judged by the same
patterns when the gateway connects. `sandbox_stdio` (default true) runs every API-registered
stdio server in a Docker sandbox unless its entry says how it is sandboxed; a `docker` command
must be the hardened run of `gateway/config/dockerrun.py`, a container already, and is not
wrapped again.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gateway.config.dockerrun import run_problems
from gateway.config.urls import Address, Endpoint, UrlPattern, parse_pattern, parse_url, refusal
from gateway.errors import ConfigError, ForbiddenError, clip
from gateway.problems import raise_if_any, validate_section

REGISTRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "allow_commands": {
            "type": "array",
            "items": {
                "type": "string",
                "pattern": r"^(/.*|[^/*?]+)$",
                "description": "a program name without wildcards, or a path glob starting with '/'",
            },
        },
        "allow_urls": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "sandbox_stdio": {"type": "boolean"},
    },
}
"""The JSON Schema of the `registration` section."""

# What `*` may not cross in a path glob: a path separator.
_PART = r"[^/]"


@cache
def _compiled(glob: str) -> re.Pattern[str]:
    """A glob as a regular expression: `**` anything, `*` within one part, `?` one character of a part."""
    pieces = re.split(r"(\*\*|\*|\?)", glob)
    wild = {"**": ".*", "*": f"{_PART}*", "?": _PART}
    return re.compile("".join(wild.get(piece, re.escape(piece)) for piece in pieces))


def glob_match(text: str, glob: str) -> bool:
    """Whether `text` matches `glob` in the registration policy's glob language (module docstring)."""
    return _compiled(glob).fullmatch(text) is not None


def resolve(command: str) -> str | None:
    """The absolute path `command` runs: a path as written, normalised (None unless absolute), a
    program name as found on the gateway's PATH (None when it is not there)."""
    if "/" not in command:
        found = shutil.which(command)
        return None if found is None else posixpath.normpath(os.path.abspath(found))
    return posixpath.normpath(command) if command.startswith("/") else None


@dataclass(frozen=True, slots=True)
class RegistrationPolicy:
    """The `registration` section: which commands and URLs the API may register, and sandboxing.
    `pinned` holds the paths its program names resolved to when it was made."""

    allow_commands: tuple[str, ...] = ()
    allow_urls: tuple[str, ...] = ()
    sandbox_stdio: bool = True
    pinned: frozenset[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = (resolve(entry) for entry in self.allow_commands if "/" not in entry)
        object.__setattr__(self, "pinned", frozenset(path for path in names if path is not None))

    @classmethod
    def from_config(cls, raw: Any, *, source_file: str) -> RegistrationPolicy:
        """The policy of a `registration` section (the defaults when absent); raises `ConfigError`."""
        if raw is None:
            return cls()
        validate_section(raw, REGISTRATION_SCHEMA, section="registration", source_file=source_file)
        for index, pattern in enumerate(raw.get("allow_urls", ())):
            try:
                parse_pattern(pattern)
            except ValueError as error:
                raise ConfigError(source_file, f"registration.allow_urls[{index}]", f"{pattern!r}: {error}") from None
        return cls(
            allow_commands=tuple(raw.get("allow_commands", ())),
            allow_urls=tuple(raw.get("allow_urls", ())),
            sandbox_stdio=raw.get("sandbox_stdio", True),
        )

    def allowed_path(self, command: str) -> str | None:
        """The absolute path `command` runs when the policy allows it (a pinned path, or one a path
        glob matches), else None."""
        path = resolve(command)
        if path is None:
            return None
        globs = (glob for glob in self.allow_commands if "/" in glob)
        return path if path in self.pinned or any(glob_match(path, glob) for glob in globs) else None

    def judge_url(self, name: str, url: str) -> Endpoint:
        """Where `url` leads, or `ForbiddenError` naming it: it does not read strictly, or no pattern matches it."""
        try:
            endpoint = parse_url(url)
        except ValueError as error:
            raise ForbiddenError(f"server {name!r}: the URL {clip(url)!r} is refused: {error}") from None
        if not self._matching(endpoint):
            raise ForbiddenError(f"server {name!r}: the URL {clip(url)!r} is not allowed by registration.allow_urls")
        return endpoint

    def judge_address(self, name: str, endpoint: Endpoint, address: Address) -> None:
        """`ForbiddenError` when `endpoint`'s host leads to `address`, which is not public and which
        no pattern matching the endpoint names."""
        reason = refusal(address)
        if reason is not None and not any(pattern.names(address) for pattern in self._matching(endpoint)):
            raise ForbiddenError(
                f"server {name!r}: {endpoint.host} resolves to {address}, {reason}, which no registration.allow_urls"
                " pattern names (give its address, or localhost for loopback, as the pattern's host to allow it)"
            )

    def _matching(self, endpoint: Endpoint) -> list[UrlPattern]:
        """The patterns that allow `endpoint`; one that does not read allows nothing."""
        patterns = []
        for text in self.allow_urls:
            try:
                pattern = parse_pattern(text)
            except ValueError:
                continue
            if pattern.matches(endpoint):
                patterns.append(pattern)
        return patterns

    def admit(self, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        """`entry` as it may be registered: sandboxed when the policy says so, else running the
        absolute path its command resolved to. `ForbiddenError` names what the policy refuses,
        `ConfigProblems` each argument of a `docker` command that is not the hardened run."""
        command, url = entry.get("command"), entry.get("url")
        # A URL that is not http(s) at all is left to the entry's own check, which answers it as invalid (422).
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            self.judge_url(name, url)
        admitted = dict(entry)
        if not isinstance(command, str):
            return admitted
        # A variable could expand to any executable after the check; only literal commands are judged.
        path = None if "${" in command else self.allowed_path(command)
        if path is None:
            raise ForbiddenError(
                f"server {name!r}: the command {clip(command)!r}{_found(command)} "
                "is not allowed by registration.allow_commands"
            )
        container = posixpath.basename(path) == "docker"
        if container:
            problems = run_problems(entry.get("args", []), entry.get("env", {}))
            raise_if_any("registration", [(("servers", name, *where), text) for where, text in problems])
        if "sandbox" not in admitted and self.sandbox_stdio and not container:
            admitted["sandbox"] = "docker"
        if "sandbox" not in admitted:
            # Runs on the host: the path judged, never a name looked up again on another PATH.
            admitted["command"] = path
        return admitted


def _found(command: str) -> str:
    """What a refusal tells of where a program name was found on the gateway's PATH."""
    if "/" in command or "${" in command:
        return ""
    path = resolve(command)
    return f" (found at {path})" if path else " (not on the gateway's PATH)"
