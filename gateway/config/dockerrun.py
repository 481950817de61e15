"""The one `docker run` the admin API may start: the sandbox's hardening, environment variables, an
image and the image's own arguments (pure).

An oci package of a registry `server.json` becomes such a run (`gateway/api/formats.py`), and a
registration whose command is `docker` must be one (`gateway/config/registration.py`), as it runs
on the host unwrapped. A definition is untrusted input: were any other flag let through, `--user 0`,
`-v /:/host`, `--privileged` or `--entrypoint` would undo the container's isolation. So the words
before the image may only be, in this order:

- `run`;
- `--env=NAME`, the value taken from the server's own `env` (kept off the command line), and
  `--env=NAME=value`;
- `HARDENING`, exactly, and last: a single-valued flag that slipped by would lose to it anyway;
- the image, a reference `[host[:port]/]path[:tag][@digest]`, which never starts with `-`.

Docker reads no flag after the image: the rest is the image's command line. The docker client
itself runs with the server's `env`, so no name it reads on the host (`DOCKER_*`, `LD_*`, `PATH`,
`HOME`, the proxies) may be set there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.errors import clip
from gateway.problems import JsonPath

HARDENING = (
    "--rm",
    "-i",
    "--network=none",
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--user=65534:65534",
    "--pids-limit=64",
    "--memory=256m",
    "--memory-swap=256m",
    "--cpus=1",
    "--tmpfs=/tmp:rw,nosuid,nodev,noexec,size=64m",
    "--init",
)
"""The hardening of the gateway's own sandbox (docs/sandbox.md) as `docker run` options."""

# The only runtime arguments an oci package may have, each with a `NAME=value`.
_ENV_FLAGS = ("-e", "--env")
# What the docker client on the host reads: where its daemon, config and credential helpers are,
# its proxies, the dynamic loader's settings.
_HOST_VARIABLES = re.compile(r"DOCKER_.*|LD_.*|PATH|HOME|(?i:(?:HTTPS?|ALL|NO)_PROXY)")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The reference grammar of docker's distribution library: a host (with a port) when the first part
# looks like one, lower-case path components joined by `.`, `_`, `__` or dashes, a tag, a digest.
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?")


def run_args(passed: Sequence[str], settings: Sequence[str], image: str, arguments: Sequence[str]) -> list[str]:
    """`docker run`'s words: `passed` variables from the server's env, `settings` (`NAME=value`), the
    hardening, the image and its arguments."""
    variables = [f"--env={variable}" for variable in (*passed, *settings)]
    return ["run", *variables, *HARDENING, image, *arguments]


def setting_problem(flag: str, value: str | None) -> str | None:
    """Why a runtime argument `flag value` may not be given to `docker run`, or None when it is
    an environment variable's `NAME=value`."""
    if flag not in _ENV_FLAGS:
        return (
            f"{clip(flag)!r} is not allowed: runtime arguments may only set environment variables "
            "(-e NAME=value), so that nothing changes the container's isolation"
        )
    name = (value or "").partition("=")[0]
    if value is None or "=" not in value or not _NAME.fullmatch(name):
        return f"{flag} needs a value NAME=value; got {None if value is None else clip(value)!r}"
    return None


def variable_problem(name: str) -> str | None:
    """Why `name` may not be an environment variable of the docker client on the host, or None."""
    if not _NAME.fullmatch(name):
        return f"{clip(name)!r} is not a variable name (letters, digits and '_', not starting with a digit)"
    if _HOST_VARIABLES.fullmatch(name):
        return (
            f"{name} is read by the docker client on the host, so it may not be set there; "
            f"pass it to the container as a runtime argument (-e {name}=value)"
        )
    return None


def image_problem(reference: str) -> str | None:
    """Why `reference` is not an image reference docker reads as the image, or None."""
    if _REFERENCE.fullmatch(reference):
        return None
    return f"{clip(reference)!r} is not an image reference ([host[:port]/]path[:tag][@digest], lower-case path)"


def run_problems(args: Any, env: Any) -> list[tuple[JsonPath, str]]:
    """Why an entry's `args` and `env` are not the hardened run (module docstring), each at its
    path in the entry: empty when they are, or when they are no list and map the schema accepts."""
    if not isinstance(args, list) or not all(isinstance(word, str) for word in args) or not isinstance(env, dict):
        return []
    problems: list[tuple[JsonPath, str]] = [(("env", name), text) for name in env if (text := variable_problem(name))]
    if args[:1] != ["run"]:
        return [*problems, (("args", 0), "docker may only run the hardened container: the first word must be 'run'")]
    index = 1
    while index < len(args) and args[index].startswith("--env="):
        if text := _variable_word(args[index].removeprefix("--env="), env):
            problems.append((("args", index), text))
        index += 1
    for offset, word in enumerate(HARDENING):
        if args[index + offset : index + offset + 1] != [word]:
            found = args[index + offset] if index + offset < len(args) else None
            return [*problems, (("args", index + offset), _misplaced(found, word))]
    index += len(HARDENING)
    if text := image_problem(args[index] if index < len(args) else ""):
        problems.append((("args", index), text))
    return problems


def _variable_word(variable: str, env: Mapping[str, Any]) -> str | None:
    """Why `--env=<variable>` may not stand in the run, or None."""
    if "=" in variable:
        return setting_problem("--env", variable)
    if variable not in env:
        return f"--env={clip(variable)} passes a variable the entry's env does not set"
    return None


def _misplaced(word: str | None, needed: str) -> str:
    """Why `word` may not stand where the hardening needs `needed`."""
    if word is None:
        return f"the hardening is cut short: {needed!r} is missing"
    return (
        f"{clip(word)!r} is not allowed: before the image only --env=NAME=value and then the gateway's "
        f"hardening, exactly, may stand ({needed!r} belongs here)"
    )
