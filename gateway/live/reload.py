"""Hot reload: what an edited configuration cannot change while the gateway runs, and the two
ways a reload is asked for, a change of the config file or a skill folder (`watch`) and SIGHUP."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import fields
from pathlib import Path

import anyio
from watchfiles import Change, DefaultFilter, awatch

from gateway.config.model import GatewayConfig, GatewaySettings

log = logging.getLogger(__name__)

DEBOUNCE_MS = 300
"""Changes closer together than this make one reload: an editor's save is often several writes."""
LIVE_SETTINGS = frozenset({"skill_dirs"})
"""Settings of the `gateway` section a reload applies; the others need a restart."""
Reload = Callable[[], Awaitable[bool]]


def needs_restart(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    """The settings that differ between `old` and `new` but only apply after a restart."""
    names = [
        f"gateway.{field.name}"
        for field in fields(GatewaySettings)
        if field.name not in LIVE_SETTINGS and getattr(old.settings, field.name) != getattr(new.settings, field.name)
    ]
    sections = ("confirmation", "local_tools", "store", "tracing")
    names += [section for section in sections if getattr(old, section) != getattr(new, section)]
    # The rest of `auth` (keys, JWTs, the anonymous role, the roles a token may name) applies live.
    if old.auth.enabled != new.auth.enabled:
        names.append("auth (turning authentication on or off)")
    return names


async def watch(config_path: Path, skill_dirs: Iterable[Path], reload: Reload, stop: anyio.Event) -> None:
    """Call `reload` whenever the config file or a file of a skill folder changes, until `stop` is set.

    The file's directory is watched, not the file: an editor that saves by renaming a new file
    over the old one would end a watch on the file itself.
    """

    def is_config(change: Change, path: str) -> bool:
        # Only the file's directory is watched, and not recursively: the name tells the file.
        return os.path.basename(path) == config_path.name

    async def follow(paths: list[Path], only: Callable[[Change, str], bool] | None, recursive: bool) -> None:
        changes = awatch(*paths, watch_filter=only, debounce=DEBOUNCE_MS, stop_event=stop, recursive=recursive)
        async for _ in changes:
            log.info("%s changed: reloading the configuration", " ".join(map(str, paths)))
            await reload()

    folders = [folder for folder in skill_dirs if folder.is_dir()]
    async with anyio.create_task_group() as group:
        group.start_soon(follow, [config_path.parent], is_config, False)
        if folders:
            group.start_soon(follow, folders, DefaultFilter(), True)


async def reload_on_hangup(reload: Reload) -> None:
    """Call `reload` on every SIGHUP (which would otherwise end the process), until cancelled."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            log.info("SIGHUP: reloading the configuration")
            await reload()
