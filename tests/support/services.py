"""Real Redis, HAProxy and PostgreSQL processes from Debian's packages (installed by .ci/redis.sh
and .ci/postgres.sh), on free loopback ports.

Without the binaries the tests that need them skip with the reason, and fail under CI=true.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.support.harness import free_port

START_LIMIT = 30.0


def binary(name: str, script: str = ".ci/redis.sh") -> str:
    """The path of a service's binary; skip (fail under CI=true) when it is not installed."""
    # Debian keeps PostgreSQL's server binaries out of PATH, under their major version.
    versioned = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    places = [f"/usr/sbin/{name}", f"/usr/bin/{name}", *versioned[-1:]]
    found = shutil.which(name) or next((p for p in places if Path(p).exists()), None)
    if found is None:
        problem = f"{name} is not installed; install it with `bash {script}`"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return found


@dataclass
class Redis:
    """A redis-server without persistence on its own port: its URL, and stopping and starting it as
    an outage would (everything it held is forgotten)."""

    url: str
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server on its port, once it answers."""
        command = [binary("redis-server"), "--bind", "127.0.0.1", "--port", str(self.port)]
        command += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + START_LIMIT
        try:
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop the server; its clients' connections are cut."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextmanager
def redis_server() -> Iterator[Redis]:
    """A fresh redis-server on a free port."""
    port = free_port()
    server = Redis(f"redis://127.0.0.1:{port}/0", port)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def haproxy_config(port: int, backends: Sequence[int]) -> str:
    """HAProxy in front of gateway replicas, as docs/replicas.md gives it: a handshake-era session
    kept on the replica that answered its `initialize` (the `Mcp-Session-Id` it returned is
    learnt in a stick table), every other request round-robin, dead replicas taken out by health checks."""
    servers = "\n".join(
        f"    server r{n} 127.0.0.1:{backend} check inter 500ms fall 2 rise 1" for n, backend in enumerate(backends)
    )
    return f"""global
    maxconn 512

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch

frontend mcp
    bind 127.0.0.1:{port}
    default_backend gateways

backend gateways
    balance roundrobin
    stick-table type string len 128 size 100k expire 2h
    stick store-response res.hdr(Mcp-Session-Id)
    stick match req.hdr(Mcp-Session-Id)
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
{servers}
"""


@contextmanager
def haproxy(backends: Sequence[int], workdir: Path) -> Iterator[int]:
    """A real HAProxy on a free port in front of `backends`; its port."""
    port = free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(haproxy_config(port, backends), "utf-8")
    log = workdir / "haproxy.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([binary("haproxy"), "-db", "-f", str(config)], stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_LIMIT
        while not _accepts(port):
            if process.poll() is not None:
                raise RuntimeError(f"haproxy exited: {log.read_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError("haproxy did not listen in time")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def redis_service() -> Iterator[str]:
    """One redis-server for the test run."""
    with redis_server() as server:
        yield server.url


@pytest.fixture
def redis_url(redis_service: str) -> str:
    """The test run's Redis, emptied for this test."""
    client = redis.Redis.from_url(redis_service)
    client.flushdb()
    client.close()
    return redis_service


@dataclass
class Postgres:
    """A PostgreSQL cluster of one test's own: its URL, and stopping and starting it as an outage would."""

    url: str
    port: int
    directory: Path
    user: str | None

    def stop(self) -> None:
        """Stop the server; every open connection is cut ("fast" shutdown)."""
        self._ctl("stop", "-m", "fast")

    def start(self) -> None:
        """Start the server again on the same port, once it accepts connections."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("start", "-l", str(self.directory / "server.log"), "-o", options)

    def _ctl(self, *arguments: str) -> None:
        command = [binary("pg_ctl", ".ci/postgres.sh"), "-D", str(self.directory / "data"), "-w"]
        command += ["-t", str(round(START_LIMIT)), *arguments]
        subprocess.run(command, check=True, user=self.user, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster on a free port, so that a test may stop and restart it without
    touching the shared test server (`.ci/postgres.sh`) other tests use; its URL names database
    `postgres` as its superuser `gateway`, trusted on loopback."""
    initdb = binary("initdb", ".ci/postgres.sh")
    directory = Path(tempfile.mkdtemp(prefix="gateway-postgres-"))
    # PostgreSQL refuses to run as root: as root, the cluster is the `postgres` user's.
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None:
        shutil.chown(directory, user)
    port = free_port()
    server = Postgres(f"postgresql://gateway@127.0.0.1:{port}/postgres", port, directory, user)
    try:
        command = [initdb, "-D", str(directory / "data"), "-U", "gateway", "--auth=trust", "--no-sync"]
        command += ["-E", "UTF8", "--locale=C"]
        subprocess.run(command, check=True, user=user, stdout=subprocess.DEVNULL)
        server.start()
        yield server
    finally:
        if (directory / "data" / "postmaster.pid").exists():
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)
