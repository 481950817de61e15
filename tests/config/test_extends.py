"""A configuration file laid over another with `extends`: the embedded defaults or a file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gateway.config.loading import default_config_path, load_config
from gateway.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
ENV = {"HOME": "/home/tester"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def docs_example(page: str, index: int) -> str:
    """The `index`-th YAML block of a docs page, exactly as written."""
    text = (REPO / "docs" / page).read_text("utf-8")
    return text.split("```yaml\n")[index + 1].split("```", 1)[0]


def test_extends_default_adds_a_server_and_keeps_the_bundled_servers_and_skills(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "gateway.yaml", docs_example("first-server.md", 0)), ENV)
    defaults = load_config(default_config_path(), ENV)
    assert [server.name for server in config.servers] == [*(s.name for s in defaults.servers), "time"]
    [time] = [server for server in config.servers if server.name == "time"]
    assert (time.command, time.args) == ("uvx", ("mcp-server-time",))
    assert config.settings.skill_dirs == defaults.settings.skill_dirs
    assert [s for s in config.servers if s.name != "time"] == list(defaults.servers)


def test_the_docs_live_registration_example_loads_with_an_admin_and_a_registration_policy(tmp_path: Path) -> None:
    path = write(tmp_path / "gateway.yaml", docs_example("first-server.md", 1))
    config = load_config(path, {**ENV, "GATEWAY_KEY": "k" * 32, "PATH": str(Path(sys.executable).parent)})
    assert config.policy.is_admin("me")
    assert config.auth.enabled
    assert config.registration.allow_urls == ("https://*.example.com/mcp",)
    assert "files" in {server.name for server in config.servers}


def test_a_server_named_again_is_merged_key_by_key_and_gateway_settings_by_key(tmp_path: Path) -> None:
    write(
        tmp_path / "base" / "base.yaml",
        "gateway: {call_timeout: 5, retries: 4, skill_dirs: ['${CONFIG_DIR}/skills']}\n"
        "servers:\n  calc: {command: python3, args: [-m, calc], cwd: '${CONFIG_DIR}'}\n"
        "roles: {dev: {allow: ['*']}}\n",
    )
    own = write(
        tmp_path / "gateway.yaml",
        "extends: base/base.yaml\n"
        "gateway: {data_dir: ./data, retries: 1, skill_dirs: [mine]}\n"
        "servers:\n  calc: {enabled: false}\n"
        "roles: {ops: {allow: ['calc__*']}}\n",
    )
    config = load_config(own, ENV)
    [calc] = config.servers
    assert (calc.command, calc.args, calc.enabled, calc.cwd) == (
        "python3",
        ("-m", "calc"),
        False,
        str(tmp_path / "base"),
    )
    assert (config.settings.call_timeout, config.settings.retries) == (5, 1)
    assert config.settings.skill_dirs == (tmp_path / "base" / "skills", tmp_path / "mine")
    assert config.policy.role_names() == frozenset({"ops"})


def test_a_data_dir_set_over_the_defaults_moves_their_database_too(tmp_path: Path) -> None:
    own = write(tmp_path / "gateway.yaml", f"extends: default\ngateway: {{data_dir: {tmp_path / 'data'}}}\n")
    [sqlite] = [server for server in load_config(own, ENV).servers if server.name == "sqlite"]
    assert f"{tmp_path / 'data'}/sqlite/main.db" in sqlite.args


def test_files_that_extend_one_another_in_a_cycle_are_refused_naming_the_chain(tmp_path: Path) -> None:
    first = write(tmp_path / "first.yaml", "extends: second.yaml\n")
    write(tmp_path / "second.yaml", "extends: first.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_config(first, ENV)
    assert caught.value.file == str(tmp_path / "second.yaml")
    assert caught.value.problem == (
        f"files extend one another in a cycle: {first} -> {tmp_path / 'second.yaml'} -> {first}"
    )


def test_a_missing_base_file_is_named_where_extends_names_it(tmp_path: Path) -> None:
    own = write(tmp_path / "gateway.yaml", "extends: nope.yaml\nservers: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(own, ENV)
    assert str(caught.value) == f"{own}: extends: 'nope.yaml' ({tmp_path / 'nope.yaml'}) no such file"


def test_a_problem_inside_the_base_file_names_the_base_file(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "servers: {a: {command: x}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path / "gateway.yaml", "extends: base.yaml\n"), ENV)
    assert caught.value.file == str(tmp_path / "base.yaml")


@pytest.mark.parametrize("value", ["", 3, ["default"]])
def test_extends_must_name_default_or_a_file(tmp_path: Path, value: object) -> None:
    with pytest.raises(ConfigError, match="extends"):
        load_config(write(tmp_path / "gateway.yaml", yaml.safe_dump({"extends": value})), ENV)


def test_a_client_file_cannot_extend_the_defaults(tmp_path: Path) -> None:
    own = write(tmp_path / "mcp.json", '{"extends": "default", "mcpServers": {"a": {"command": "x"}}}')
    with pytest.raises(ConfigError, match="only files in the gateway's own format"):
        load_config(own, ENV)
