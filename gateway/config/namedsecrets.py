"""The `secrets` section: values the operator names, for servers to use as `${secret:NAME}`.

```yaml
secrets:
  github_token: {value: "${GITHUB_TOKEN}", registrations: true}
  search_key: {file: /run/secrets/search_key}
```

A value is written in the file (where `${VAR}` reads the environment, the file being the
operator's) or read from a file (relative to the config file's directory; one final newline is
dropped). The config file's servers may use every secret; servers registered through the API only
those marked `registrations: true`, and nothing else the gateway knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.problems import ConfigProblems, validate_section

SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
SECRETS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"pattern": SECRET_NAME},
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "value": {"type": "string"},
            "file": {"type": "string", "minLength": 1},
            "registrations": {"type": "boolean"},
        },
    },
}
"""The JSON Schema of the `secrets` section."""


@dataclass(frozen=True, slots=True)
class Secrets:
    """The `secrets` section: every value by name, and the names offered to API registrations."""

    values: Mapping[str, str] = field(default_factory=dict)
    offered: frozenset[str] = frozenset()

    def for_registrations(self) -> dict[str, str]:
        """The secrets a server registered through the API may name."""
        return {name: value for name, value in self.values.items() if name in self.offered}

    @classmethod
    def from_config(cls, raw: Any, *, source_file: str, base_dir: Path) -> Secrets:
        """The secrets of a `secrets` section (none when absent), files read; raises `ConfigProblems`."""
        if raw is None:
            return cls()
        validate_section(raw, SECRETS_SCHEMA, section="secrets", source_file=source_file, hide_values=True)
        problems: list[tuple[str, str]] = []
        values: dict[str, str] = {}
        for name, entry in raw.items():
            if ("value" in entry) == ("file" in entry):
                problems.append((f"secrets.{name}", "needs either value or file"))
            elif "value" in entry:
                values[name] = entry["value"]
            else:
                path = base_dir / entry["file"]
                try:
                    text = path.read_text("utf-8")
                except (OSError, UnicodeError) as error:
                    problems.append((f"secrets.{name}.file", f"cannot read {path}: {error}"))
                    continue
                values[name] = text.removesuffix("\n").removesuffix("\r")
        if problems:
            raise ConfigProblems(source_file, problems)
        offered = frozenset(name for name, entry in raw.items() if entry.get("registrations", False))
        return cls(values, offered)
