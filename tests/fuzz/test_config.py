"""Any configuration, however malformed, gives a GatewayConfig or a ConfigError, and does so quickly."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config.loading import load_config, parse_config
from gateway.config.model import GatewayConfig
from gateway.errors import ConfigError

from . import RUNS, SCALARS, TEXT, json_values, nested

# A guard against blow-ups (alias bombs, quadratic parsing), in CPU seconds of the reading thread so that a
# busy machine does not stretch it: the slowest file here (deep_flow.yaml) takes 0.5 s, this is ten times that.
CPU_BOUND = 5.0
ENVIRON = {"HOME": "/home/operator", "TOKEN": "t0ken"}

SETTING_KEYS = [
    "data_dir", "session_idle_timeout", "call_timeout", "retries", "max_result_chars", "loop_window",
    "loop_repeat_limit", "disclosure", "skill_dirs", "allowed_origins", "restart_backoff_initial",
    "restart_backoff_max", "stdio_role", "sandbox_warm", "http_json_responses",
]  # fmt: skip
SERVER_KEYS = [
    "command", "args", "env", "cwd", "url", "headers", "transport", "namespace", "enabled", "required",
    "timeout", "layer", "tags", "sandbox", "risk", "scope", "tools", "type", "serverUrl", "disabled",
    "disabledTools", "envFile", "transportType",
]  # fmt: skip
SANDBOX_KEYS = ["mode", "memory", "cpus", "pids", "tmpfs", "deadline", "max_output_bytes", "command"]
TOOL_KEYS = ["timeout", "layer", "sandbox", "risk", "tags", "enabled", "name"]

# Values close to valid ones find more than random data: the schema lets them through to the code after it.
NEAR_VALID = st.sampled_from(
    [
        "64m", "64m\n", "1g\n", "9" * 5000 + "m", "0", "~", "~/x", "~no-such-user-here/x", "./d", "/", "\x00",
        "http://", "http://[", "http://[::1", "https://h/sse", "http://h:99999999", "stdio", "http", "sse",
        "streamable-http", "session", "shared", "docker", "core", "extended", "low", "${TOKEN}", "${NOPE}",
        "${NOPE:-x}", "${WORKSPACE}", "${", "$$", "${input:x}", "\ud800", 0, -1, 1, 10**400, 1e308,
        float("inf"), float("nan"), True, [], {}, ["a"], {"a": "b"},
    ]
)  # fmt: skip
VALUES = st.one_of(NEAR_VALID, SCALARS, json_values(8))


def section(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Maps with some of `keys` (and now and then an unknown one) set to `values`."""
    return st.dictionaries(st.one_of(st.sampled_from(keys), TEXT), values, max_size=6)


SANDBOX = st.one_of(NEAR_VALID, section(SANDBOX_KEYS, VALUES))
TOOL = section(TOOL_KEYS, st.one_of(VALUES, SANDBOX))
SERVER = section(SERVER_KEYS, st.one_of(VALUES, SANDBOX, st.dictionaries(TEXT, TOOL, max_size=2)))
SERVERS = st.dictionaries(st.one_of(st.sampled_from(["files", "a", "b", "a-b", "x" * 33]), TEXT), SERVER, max_size=3)
LOCAL_TOOLS = st.lists(st.one_of(NEAR_VALID, section(["ref", "namespace", "layer", "timeout", "tags"], VALUES)))
DOCUMENTS = st.one_of(
    json_values(),
    st.fixed_dictionaries(
        {},
        optional={
            "gateway": section(SETTING_KEYS, VALUES),
            "servers": SERVERS,
            "local_tools": LOCAL_TOOLS,
            "roles": json_values(8),
            "auth": json_values(8),
        },
    ),
    st.fixed_dictionaries({"mcpServers": SERVERS}, optional={"inputs": json_values(4)}),
    st.fixed_dictionaries({"servers": SERVERS}, optional={"inputs": json_values(4)}),
)


def accepted_or_refused(read: Any) -> None:
    """`read()` returns a GatewayConfig or raises ConfigError, within the CPU bound."""
    started = time.thread_time()
    try:
        assert isinstance(read(), GatewayConfig)
    except ConfigError as error:
        assert str(error)
    assert time.thread_time() - started < CPU_BOUND


@RUNS
def test_any_parsed_data_gives_a_config_or_a_config_error(runs: settings, tmp_path: Path) -> None:
    @runs
    @given(DOCUMENTS)
    def check(data: Any) -> None:
        accepted_or_refused(lambda: parse_config(data, source="fuzz.yaml", base_dir=tmp_path, environ=ENVIRON))

    check()


YAML_SYNTAX = "{}[]:,-&*!|>'\"\n #ab1.~<"


def yaml_text(value: Any) -> str:
    """`value` written as YAML flow text (JSON is YAML), or a mangled version of it."""
    return json.dumps(value, allow_nan=True)


@RUNS
def test_any_file_content_gives_a_config_or_a_config_error(runs: settings, tmp_path: Path) -> None:
    @runs
    @given(
        st.one_of(
            st.binary(max_size=300),
            st.builds(lambda d: yaml_text(d).encode("utf-8", "surrogatepass"), DOCUMENTS),
            st.builds(lambda t: t.encode("utf-8", "surrogatepass"), st.text(alphabet=YAML_SYNTAX, max_size=120)),
        ),
        st.sampled_from(["fuzz.yaml", "fuzz.json"]),
    )
    def check(content: bytes, name: str) -> None:
        path = tmp_path / name
        path.write_bytes(content)
        accepted_or_refused(lambda: load_config(path, environ=ENVIRON))

    check()


def alias_bomb(levels: int) -> str:
    """A YAML document whose aliases expand to 9**levels strings (the "billion laughs")."""
    lines = ['  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        lines.append(f"  l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    return "roles:\n" + "\n".join(lines) + "\n"


HOSTILE_FILES = {
    "alias_bomb.yaml": alias_bomb(9).encode(),
    "alias_bomb_in_servers.yaml": alias_bomb(9).replace("roles:", "servers:\n  a:\n    args:").encode(),
    "self_reference.yaml": b"roles: &a {x: *a}\n",
    "self_reference_list.yaml": b"auth: &a [*a]\n",
    "deep_flow.yaml": b"roles: " + b"[" * 50_000 + b"]" * 50_000,
    "deep_block.yaml": b"roles:\n  " + b"- " * 50_000 + b"x\n",
    "deep.json": b'{"roles": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    "huge_int.yaml": b"gateway: {retries: " + b"9" * 5000 + b"}",
    "huge_int.json": b'{"gateway": {"retries": ' + b"9" * 5000 + b"}}",
    "huge_float.json": b'{"gateway": {"call_timeout": 1' + b"0" * 400 + b"}}",
    "nan.json": b'{"gateway": {"call_timeout": NaN}}',
    "invalid_utf8.yaml": b"gateway:\n  data_dir: \xff\xfe\n",
    "binary_value.yaml": b"roles: {admin: !!binary aGVsbG8=}\n",
    "date_value.yaml": b"roles: {admin: {tools: [2020-01-01]}}\n",
    "python_object.yaml": b"roles: !!python/object/apply:os.system [echo]\n",
    "surrogate_name.json": b'{"mcpServers": {"a": {"command": "x"}, "a\\ud800": {"command": "y"}}}',
    "tmpfs_newline.json": b'{"servers": {"a": {"command": "x", "sandbox": {"tmpfs": "64m\\n"}}}}',
    "unknown_user.yaml": b"gateway: {data_dir: ~no-such-user-here/data}\n",
    "bad_ipv6_url.yaml": b"servers: {a: {url: 'http://[::1'}}\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_a_hostile_file_is_refused_or_read_quickly(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_bytes(HOSTILE_FILES[name])
    accepted_or_refused(lambda: load_config(path, environ=ENVIRON))


def test_deeply_nested_parsed_data_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        parse_config({"roles": nested(5000)}, source="fuzz.yaml", base_dir=tmp_path, environ=ENVIRON)
