"""Removes our labelled containers once past their deadline, and all of them at start-up."""

from __future__ import annotations

import logging

import docker.errors
from docker import DockerClient
from docker.models.containers import Container

from gateway.sandbox.containers import DOCKER_ERRORS
from gateway.sandbox.hardening import LABEL_DEADLINE, LABEL_SANDBOX, LABEL_SCOPE

logger = logging.getLogger(__name__)


def sweep(client: DockerClient, now: float, scope: str | None = None) -> int:
    """Remove every container of ours (of `scope`, if given) whose deadline is at or before `now`; return how many."""
    removed = 0
    # A container removed between the listing and its inspection (a pool's, a finished call's) is skipped.
    listed = client.containers.list(all=True, filters={"label": scope_filter(scope)}, ignore_removed=True)
    for container in listed:
        try:
            deadline = float(container.labels.get(LABEL_DEADLINE, "0"))
        except ValueError:
            deadline = 0.0  # a label we cannot read cannot keep a container alive
        if deadline <= now and _remove(container):
            removed += 1
    return removed


def sweep_all(client: DockerClient, scope: str | None = None) -> int:
    """Remove every container of ours (of `scope`, if given): at start-up, when none can still be in use."""
    return sweep(client, float("inf"), scope)


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
