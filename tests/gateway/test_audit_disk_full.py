"""A disk too full for the audit trail: calls are refused before they run, said once in the log,
`/readyz` answers 503, and serving resumes by itself when space returns."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import mcp_types as types
import pytest

from gateway.config.loading import parse_config
from tests.support.access import http_client
from tests.support.harness import http_gateway, in_memory, placeholder
from tests.support.toy import build_server as toy

pytestmark = [
    pytest.mark.anyio,
    # Mounting a small file system needs root; CI and the development machines run as root.
    pytest.mark.skipif(os.geteuid() != 0, reason="a size-limited tmpfs needs root"),
]


@contextmanager
def small_disk(directory: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted at `directory`, unmounted on the way out."""
    directory.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def fill(path: Path) -> None:
    """Write `path` until the file system it is on has no byte left."""
    with open(path, "wb", buffering=0) as file:
        try:
            while True:
                file.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
        try:
            while True:
                file.write(b"\0")
        except OSError as error:
            assert error.errno == errno.ENOSPC


def text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


async def test_a_call_that_cannot_be_audited_is_refused_before_it_runs_and_serving_resumes_when_space_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway")
    with small_disk(tmp_path / "spool") as spool:
        document = {
            "gateway": {"data_dir": str(tmp_path / "data")},
            "store": {"spool": str(spool)},
            "servers": placeholder(["toy"]),
        }
        config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
        async with (
            http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
            http_client(url) as client,
            httpx2.AsyncClient(base_url=url) as http,
        ):
            fill(spool / "filler")
            refused = [await client.call_tool("toy__echo", {"text": f"call {n}"}) for n in range(20)]
            full = await http.get("/readyz")
            (spool / "filler").unlink()
            ready = await http.get("/readyz")
            served = await client.call_tool("toy__echo", {"text": "after"})
            reached = text(await client.call_tool("toy__calls", {}))
            rows = await gateway.audit.recent(tool="toy__echo")

    for result in refused:
        assert result.is_error
        assert text(result).startswith(
            "The gateway cannot write its audit trail now (No space left on device), so the call was not run"
        )
        assert str(spool) not in text(result)
    assert reached == "1"
    assert (full.status_code, full.json()["audit"]) == (
        503,
        "the audit trail cannot be written: No space left on device",
    )
    assert ready.status_code == 200 and "audit" not in ready.json()
    assert not served.is_error and text(served) == "after"
    assert [row.outcome for row in rows] == ["ok"]
    said = [record.getMessage() for record in caplog.records if "audit" in record.getMessage()]
    assert len(said) == 2, said
    assert "calls are refused until it can" in said[0] and str(spool) in said[0]
    assert said[1] == "the audit trail can be written again; 20 calls were refused meanwhile"
