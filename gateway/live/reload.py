"""Hot reload: what an edited configuration cannot change while the gateway runs, the two ways a
reload is asked for, a change of the config file or a skill folder (`watch`) and SIGHUP, and the
configuration in force with each edit applied to the servers, roles, keys, skills and groups (`Reloader`)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import fields, replace
from pathlib import Path

import anyio
from watchfiles import Change, DefaultFilter, awatch

from gateway.auth.authenticator import Authenticator
from gateway.auth.visibility import Visibility
from gateway.config.loading import load_config
from gateway.config.model import GatewayConfig, GatewaySettings
from gateway.errors import ConfigError
from gateway.live.catalog import LiveCatalog
from gateway.live.groups import LiveGroups
from gateway.live.serveradmin import ServerAdmin
from gateway.runtime.redaction import Redactor
from gateway.skills.folder import load_skills
from gateway.skills.host import SkillHost

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


class Reloader:
    """The configuration in force, and its edits applied live to the parts that follow them;
    `started` is set once the gateway runs (a reload waits for it)."""

    def __init__(
        self,
        config: GatewayConfig,
        servers: ServerAdmin,
        groups: LiveGroups,
        catalog: LiveCatalog,
        visibility: Visibility,
        authenticator: Authenticator,
        skills: SkillHost,
        redact: Redactor,
        started: anyio.Event,
    ) -> None:
        self.config = config
        """The configuration in force: what the gateway started with, and what reloads changed of it."""
        self._started_with = config
        self._servers = servers
        self._groups = groups
        self._catalog = catalog
        self._visibility = visibility
        self._authenticator = authenticator
        self._skills = skills
        self._redact = redact
        self._started = started
        self.reload_errors: tuple[str, ...] = ()
        """Why the last edit of the config file was rejected; empty once one applies."""
        self.pending_restart: tuple[str, ...] = ()
        """What the config file now says that only a restart applies (for `/readyz` and the API)."""

    async def reload_from_file(self) -> bool:
        """Read `config.path` again and apply it; an invalid file is logged and kept in
        `reload_errors`, and the running configuration stays. True when it applied."""
        if self.config.path is None:
            return False
        try:
            config = await anyio.to_thread.run_sync(load_config, self.config.path)
        except ConfigError as error:
            self.reload_errors = tuple(error.message.splitlines())
            for line in self.reload_errors:
                log.error("configuration not reloaded: %s", line)
            return False
        self.reload_errors = ()
        await self.reload(config)
        return True

    async def reload(self, config: GatewayConfig) -> None:
        """Apply an edited configuration live: servers, roles and skills; settings that only a
        restart applies are named in a warning and keep their running values."""
        await self._started.wait()
        for name in needs_restart(self.config, config):
            log.warning("configuration: %s changed; it applies only after a restart", name)
        # Against what this process started with: an edit undone needs no restart any more.
        self.pending_restart = tuple(needs_restart(self._started_with, config))
        async with self._servers.live.lock:
            # Before the servers: registrations that were skipped may name a secret offered only now.
            self.config = replace(self.config, secrets=config.secrets)
            self._redact.learn(config.secrets.values.values())
            await self._servers.live.follow_file(config.servers)
            self._visibility.policy = config.policy
            if config.auth.enabled == self._authenticator.settings.enabled:
                # Keys, JWT settings and the roles a token may name take effect with the next request.
                self._authenticator.settings = config.auth
                self._redact.learn(config.auth.plain_keys)
            # Read again whether or not the list changed: the watcher also reloads when a folder's files change.
            self._skills.replace(await anyio.to_thread.run_sync(load_skills, config.settings.skill_dirs))
            settings = replace(self.config.settings, skill_dirs=config.settings.skill_dirs)
            self.config = replace(
                self.config,
                servers=config.servers,
                policy=config.policy,
                groups=config.groups,
                settings=settings,
                registration=config.registration,
                auth=self._authenticator.settings,
            )
            self._servers.members_changed()
        await self._groups.follow_file(config.groups)
        await self._catalog.changed()
        log.info("configuration reloaded from %s", config.path)
