"""The host's own admin credential: what lets the person at the machine approve calls, and no model.

`serve` makes a random token when it starts and, once it serves, writes it with the URL it listens
at to `local-admin.json` in the data directory (`0600`, in the `0700` directory), removed when it
stops. The commands against a
running gateway read that file when no `--url` names another gateway, so `python -m gateway
approvals approve ID` works without flags. The token is an admin of the admin API and the web page
whatever the `auth` section says; `serve` also prints a sign-in link for the page that works once,
making that browser an admin. Whoever can read the data directory could already decide approvals
there directly; the token gives nobody else anything. It appears only in that file, on the terminal
that started `serve` and (as a session id, not the token) in the person's browser cookie: never in a
tool result, an audit row, a log line or an MCP answer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from gateway.runtime.datadir import PRIVATE_FILE

HOST_FILE = "local-admin.json"
"""Where `serve` writes its URL and token, under the data directory."""
LINK_PATH = "/signin/host"
"""The web page's one-time sign-in link: `LINK_PATH/<code>`."""


@dataclass(slots=True)
class HostAccess:
    """This process's URL as a command on the host reaches it, its host token and its one-time sign-in link's code."""

    url: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    link_code: str | None = field(default_factory=lambda: secrets.token_urlsafe(32))
    """None once the link has been used."""

    def matches(self, token: str) -> bool:
        """Whether `token` is the host token (compared in constant time)."""
        return hmac.compare_digest(_digest(token), _digest(self.token))

    def redeem(self, code: str) -> bool:
        """Whether `code` is the sign-in link's code, still unused; it is used up by this call."""
        if self.link_code is None or not hmac.compare_digest(_digest(code), _digest(self.link_code)):
            return False
        self.link_code = None
        return True

    def link(self) -> str:
        """The one-time sign-in link."""
        return f"{self.url}{LINK_PATH}/{self.link_code}"

    def write(self, data_dir: Path) -> None:
        """Write the URL and the token to the data directory's `HOST_FILE`, readable by its owner only."""
        path = data_dir / HOST_FILE
        text = json.dumps({"url": self.url, "token": self.token})
        descriptor = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        os.replace(path.with_suffix(".tmp"), path)

    def remove(self, data_dir: Path) -> None:
        """Remove `HOST_FILE` if it still holds this process's token (another gateway may have written it since)."""
        found = read_host_file(data_dir)
        if found is not None and self.matches(found[1]):
            with suppress(FileNotFoundError):
                (data_dir / HOST_FILE).unlink()


def read_host_file(data_dir: Path) -> tuple[str, str] | None:
    """The URL and token a serving gateway left in `data_dir`; None when there is no usable file."""
    try:
        found = json.loads((data_dir / HOST_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("url"), str) or not isinstance(found.get("token"), str):
        return None
    return found["url"], found["token"]


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()
