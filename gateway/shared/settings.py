"""The `store` section: where state lives when several replicas serve as one gateway.

Both keys are optional; without them everything stays in the process and under `data_dir`, the
single-node default. `redis` moves the fast shared state (budgets, stateless-era skill state and
loop windows, change fan-out) to Redis; `url` names the database of the durable records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.errors import ConfigError

SECTION = "store"
REDIS_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where shared state lives; None means in this process."""

    url: str | None = None
    redis: str | None = None

    @classmethod
    def from_config(cls, section: Any, *, source_file: str) -> StoreSettings:
        """The settings of a `store` section (defaults when None); raises `ConfigError` naming the key."""
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(source_file, SECTION, f"expected a map, got {type(section).__name__}")
        unknown = sorted(set(map(str, section)) - {"url", "redis"})
        if unknown:
            raise ConfigError(source_file, f"{SECTION}.{unknown[0]}", "unknown key; expected `url` or `redis`")
        values: dict[str, str | None] = {}
        for key in ("url", "redis"):
            value = section.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(source_file, f"{SECTION}.{key}", "expected a non-empty string (a URL)")
            values[key] = value
        redis = values["redis"]
        if redis is not None and urlsplit(redis).scheme not in REDIS_SCHEMES:
            raise ConfigError(
                source_file,
                f"{SECTION}.redis",
                "expected a redis://, rediss:// or unix:// URL, e.g. redis://redis:6379/0",
            )
        return cls(url=values["url"], redis=redis)
