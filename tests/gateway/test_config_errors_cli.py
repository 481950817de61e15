"""The command line on good and bad configurations: `check` and `catalog --json`."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.loading import load_config
from gateway.errors import ConfigError
from gateway.stores import StoreSettings
from gateway.stores.names import NameStore
from tests.support.harness import REPO, run_cli, toy_stdio


def write_config(tmp_path: Path, servers: dict[str, Any], name: str = "gateway.yaml") -> Path:
    """A gateway YAML file with its data under `tmp_path`."""
    path = tmp_path / name
    settings = {"data_dir": str(tmp_path / "data"), "upstream_connect_timeout": 10}
    path.write_text(yaml.safe_dump({"gateway": settings, "servers": servers}))
    return path


def test_an_invalid_value_is_named_by_file_path_and_problem(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"toy": {"command": "python", "timeout": "soon"}})
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.file == str(path)
    assert raised.value.path == "servers.toy.timeout"
    assert "soon" not in raised.value.problem and raised.value.problem


def test_an_unknown_key_is_reported_with_a_suggestion(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"toy": {"command": "python", "requird": True}})
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.path == "servers.toy.requird"
    assert "did you mean 'required'" in raised.value.problem


def test_a_syntax_error_is_reported_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("servers:\n  toy: {command: python\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.file == str(path)
    assert raised.value.path.startswith("line 3, column")
    assert "YAML syntax error" in raised.value.problem


def test_check_on_an_invalid_file_exits_non_zero_and_says_where(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"toy": {"command": "python", "timeout": -1}})
    command = [sys.executable, "-m", "gateway", "check", "--config", str(path)]
    env = {**os.environ, "GATEWAY_DATA_DIR": str(tmp_path)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert str(path) in done.stderr and "servers.toy.timeout" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_reports_each_server_its_tool_count_and_the_tools_left_out_for_names_not_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    plain = {**toy_stdio("plain", "--prefix", "alpha__"), "namespace": ""}
    path = write_config(tmp_path, {"alpha": toy_stdio("alpha"), "plain": plain})
    with caplog.at_level(logging.WARNING):
        code, out, err = run_cli(capsys, "check", "--config", str(path))
    left_out = "tool 'alpha__echo' of server 'plain' left out: the name 'alpha__echo' is under the namespace of 'alpha'"
    assert code == 0, err
    assert "[ok] alpha (stdio): 12 tools" in out and "[ok] plain (stdio): 12 tools" in out
    assert f"warning: {left_out}" in out
    assert left_out in caplog.text
    assert "catalog: 23 tools" in out
    # `check` only looks: the names it saw are not claimed for a gateway serving this data directory.
    store = NameStore.open(StoreSettings(), tmp_path / "data")
    assert store.rows() == []
    store.close()


def test_check_exits_1_when_a_required_server_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = {**toy_stdio("needed", "--fail-at-start"), "required": True}
    path = write_config(tmp_path, {"needed": failing})
    code, out, _ = run_cli(capsys, "check", "--config", str(path))
    assert code == 1
    assert "[FAIL] needed (stdio required)" in out
    assert "toy server refuses to start" in out


def test_check_accepts_a_claude_desktop_file_as_it_is(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "data"))
    entry = toy_stdio("desk")
    desk = {"command": entry["command"], "args": entry["args"], "env": {"PYTHONPATH": str(REPO)}}
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"desk": desk, "Desk Two": desk}, "globalShortcut": "Ctrl+Space"}))
    with caplog.at_level(logging.WARNING):
        code, out, err = run_cli(capsys, "check", "--config", str(path))
    assert code == 0, err
    assert "[ok] desk (stdio): 12 tools" in out
    assert "[ok] Desk_Two (stdio): 12 tools" in out
    assert "note: server 'Desk Two' is called 'Desk_Two' here" in out
    assert "'Desk Two' is called 'Desk_Two'" in caplog.text


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_client_server_names_that_cannot_prefix_tools_are_given_fitting_ones(tmp_path: Path, suffix: str) -> None:
    names = ["my server", "my.server", "my_server", "Brave Search (web)", "@scope/pkg"]
    path = tmp_path / f"mcp{suffix}"
    path.write_text(json.dumps({"mcpServers": {name: {"command": "python"} for name in names}}))
    config = load_config(path, {"GATEWAY_DATA_DIR": str(tmp_path)})
    fitted = [server.name for server in config.servers]
    assert fitted[2:] == ["my_server", "Brave_Search_web", "scope_pkg"]
    assert len(set(fitted)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name) for name in fitted)
    assert [server.namespace for server in config.servers] == fitted
    assert len(config.notes) == 4
    assert load_config(path, {"GATEWAY_DATA_DIR": str(tmp_path)}).servers == config.servers


def test_a_problem_in_a_renamed_server_is_reported_under_its_own_name(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"my server": {"command": "python", "url": "http://h/mcp"}}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path, {"GATEWAY_DATA_DIR": str(tmp_path)})
    assert raised.value.path == 'mcpServers["my server"]'


def test_the_catalog_table_shows_each_tool_s_derived_risk_and_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, {"beta": {**toy_stdio("beta"), "tools": {"fail": {"risk": "high"}}}})
    code, out, err = run_cli(capsys, "catalog", "--config", str(path))
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:5] == ["NAME", "SOURCE", "RISK", "SANDBOX", "LAYER"]
    cells = {line.split()[0]: line.split()[2:4] for line in rows if line.startswith("beta__")}
    assert cells["beta__echo"] == ["low", "-"]
    assert cells["beta__increment"] == ["medium", "-"]
    assert cells["beta__fail"] == ["high", "-"]
    code, out, err = run_cli(capsys, "catalog", "--json", "--config", str(path))
    risks = {row["name"]: row["risk"] for row in json.loads(out)["tools"]}
    assert (risks["beta__echo"], risks["beta__increment"], risks["beta__fail"]) == ("low", "medium", "high")


def test_catalog_json_prints_the_merged_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, {"beta": {**toy_stdio("beta"), "namespace": "b"}})
    code, out, err = run_cli(capsys, "catalog", "--json", "--config", str(path))
    assert code == 0, err
    rows = json.loads(out)["tools"]
    by_name = {row["name"]: row for row in rows}
    assert len(rows) == 12
    assert by_name["b__echo"]["source"] == "beta" and by_name["b__echo"]["original_name"] == "echo"
    assert by_name["b__weather"]["read_only"] is True
