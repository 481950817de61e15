"""The one `docker run` a registration may start: what may stand before the image, and what not."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config.dockerrun import HARDENING, run_args, run_problems

ENV = {"TOKEN": "${TOKEN}"}
RUN = ["run", "--env=TOKEN", "--env=MODE=fast", *HARDENING, "ghcr.io/example/weather:1", "serve", "--privileged"]


def test_the_run_built_for_a_package_is_the_hardened_run() -> None:
    built = run_args(["TOKEN"], ["MODE=fast"], "ghcr.io/example/weather:1", ["serve", "--privileged"])
    assert built == [
        "run",
        "--env=TOKEN",
        "--env=MODE=fast",
        *HARDENING,
        "ghcr.io/example/weather:1",
        "serve",
        "--privileged",
    ]
    assert run_problems(RUN, ENV) == []


def with_inserted(index: int, *words: str) -> list[str]:
    """The hardened run with `words` put in at `index`."""
    return [*RUN[:index], *words, *RUN[index:]]


@pytest.mark.parametrize(
    ("args", "where", "named"),
    [
        (with_inserted(1, "--user", "0:0"), 1, "'--user'"),
        (with_inserted(3, "--privileged"), 3, "'--privileged'"),
        (with_inserted(3 + len(HARDENING), "--user=0:0"), 3 + len(HARDENING), "'--user=0:0'"),
        (with_inserted(3 + len(HARDENING), "-v", "/:/host"), 3 + len(HARDENING), "'-v'"),
        (["run", *HARDENING[:-1]], len(HARDENING), "cut short"),
        (["exec", *RUN[1:]], 0, "'run'"),
        (with_inserted(1, "--env=PATH"), 1, "PATH"),
        (with_inserted(1, "--env=9=x"), 1, "'9=x'"),
    ],
)
def test_a_word_that_is_not_the_hardened_run_is_a_problem_naming_it(args: list[str], where: int, named: str) -> None:
    [(path, text)] = run_problems(args, ENV)
    assert path == ("args", where) and named in text


def test_a_variable_the_docker_client_reads_on_the_host_is_a_problem_of_the_env() -> None:
    env: dict[str, Any] = {**ENV, "DOCKER_HOST": "tcp://evil.test:2375"}
    [(path, text)] = run_problems(RUN, env)
    assert path == ("env", "DOCKER_HOST") and "read by the docker client" in text


def test_args_or_env_of_the_wrong_kind_are_left_to_the_schema() -> None:
    assert run_problems("run", ENV) == run_problems(RUN, []) == []
