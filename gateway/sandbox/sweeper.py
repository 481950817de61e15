"""Removes our labelled containers once past their deadline, and at start-up those whose gateway is gone."""

from __future__ import annotations

import logging
from collections.abc import Callable

import docker.errors
from docker import DockerClient
from docker.models.containers import Container

from gateway.runtime import owners
from gateway.sandbox.containers import DOCKER_ERRORS
from gateway.sandbox.hardening import LABEL_DEADLINE, LABEL_OWNER, LABEL_SANDBOX, LABEL_SCOPE

logger = logging.getLogger(__name__)


def sweep(client: DockerClient, now: float, scope: str | None = None) -> int:
    """Remove every container of ours (of `scope`, if given) whose deadline is at or before `now`; return how many."""
    return _sweep(client, scope, lambda container: _deadline(container) <= now)


def sweep_all(client: DockerClient, scope: str | None = None) -> int:
    """Remove every container of ours (of `scope`, if given) whose gateway is gone: at start-up, when
    none of those can still be in use. A gateway still running on the same data directory (another
    window's `stdio` gateway) keeps its own."""
    return _sweep(
        client, scope, lambda container: not owners.is_another_live_gateway(container.labels.get(LABEL_OWNER, ""))
    )


def _sweep(client: DockerClient, scope: str | None, doomed: Callable[[Container], bool]) -> int:
    removed = 0
    # A container removed between the listing and its inspection (a pool's, a finished call's) is skipped.
    listed = client.containers.list(all=True, filters={"label": scope_filter(scope)}, ignore_removed=True)
    for container in listed:
        if doomed(container) and _remove(container):
            removed += 1
    return removed


def _deadline(container: Container) -> float:
    try:
        return float(container.labels.get(LABEL_DEADLINE, "0"))
    except ValueError:
        return 0.0  # a label we cannot read cannot keep a container alive


def scope_filter(scope: str | None) -> list[str]:
    """The docker label filter selecting our containers, or only those of one scope."""
    return [f"{LABEL_SANDBOX}=1"] + ([f"{LABEL_SCOPE}={scope}"] if scope is not None else [])


def _remove(container: Container) -> bool:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return False
    except DOCKER_ERRORS:
        logger.warning("could not sweep sandbox container %s", container.id, exc_info=True)
        return False
    return True
