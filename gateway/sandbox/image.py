"""Builds the sandbox image (Python 3.11, the MCP SDK and the bundled servers) and the gateway's own image,
each from its Dockerfile on a registry's base or, without a registry, from a Debian root filesystem."""

from __future__ import annotations

import argparse
import compileall
import hashlib
import importlib.metadata
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
from docker import DockerClient

from gateway.errors import GatewayError
from gateway.sandbox.hardening import DEFAULT_IMAGE

LABEL_FINGERPRINT = "io.mcp-gateway.image-fingerprint"
SITE_DIR = "/opt/site"
GATEWAY_DIR = "/opt/gateway"
IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH": f"{SITE_DIR}:{GATEWAY_DIR}",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
GATEWAY_IMAGE = "mcp-gateway:latest"
# Stands in for python:3.11-slim-bookworm, the top-level Dockerfile's default BASE, where no registry answers.
PYTHON_BASE = "mcp-gateway-python:3.11-bookworm"
# The extras the top-level Dockerfile installs (`pip install ".[replicas,semantic]"`): the offline
# base holds their packages.
GATEWAY_EXTRAS = ("replicas", "semantic")
BASE_SITE = "/usr/local/lib/python3.11/dist-packages"
BASE_WHEELS = "/usr/local/share/python-wheels"
BASE_ENV = {
    "PATH": IMAGE_ENV["PATH"],
    "LANG": "C.UTF-8",
    # pip inside the image never asks an index: what a Dockerfile installs is there already, and the
    # build backends that pip's isolated builds install wait as wheels.
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": BASE_WHEELS,
    # Debian marks its Python as apt's (PEP 668); in this image pip alone installs Python packages.
    "PIP_BREAK_SYSTEM_PACKAGES": "1",
}
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
REGISTRY_PROBE = "https://registry-1.docker.io/v2/"

# Parts of the Debian tree that no sandboxed program needs; leaving them out halves the image.
_SKIPPED = (
    "dev/",
    "var/cache/apt/",
    "var/lib/apt/lists/",
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/locale/",
    "usr/share/info/",
)
_STEP_TIMEOUT = 1800.0
# The colour codes docker's classic builder wraps around a step's standard error.
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
# pip evaluates the markers of dependencies against the Python it runs on, not the one it installs
# for; run as the image's Python, it installs what that one needs (redis needs async-timeout below
# 3.11.3, and Debian's is 3.11.2).
_PIP_AS = (
    "import platform, runpy, sys; version = sys.argv.pop(1); "
    "platform.python_version = lambda: version; "
    "platform.python_version_tuple = lambda: tuple(version.split('.')); "
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)"
)

Method = Literal["auto", "dockerfile", "rootfs"]
Progress = Callable[[str], None]


class ImageBuildError(GatewayError):
    """The sandbox image could not be built; the message names the failed stage."""


def default_data_dir() -> Path:
    """Where build caches live: `$XDG_CACHE_HOME/mcp-gateway/sandbox` (or under ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-gateway" / "sandbox"


def mcp_version() -> str:
    """The MCP SDK version installed in the image: the gateway's own, so both speak alike."""
    return importlib.metadata.version("mcp")


@dataclass(frozen=True, slots=True)
class Sources:
    """What the image is built from: the `servers` package and the Dockerfile beside this module,
    found where they are installed (a checkout, a wheel), never relative to a repository."""

    servers: Path
    dockerfile: Path

    @classmethod
    def installed(cls) -> Sources:
        """The installed `servers` package and `gateway/sandbox/Dockerfile`."""
        servers = resources.files("servers")
        dockerfile = resources.files(__package__ or "gateway.sandbox").joinpath("Dockerfile")
        # Installed as files (a wheel, a checkout); a zipped install could not be a build context.
        return cls(Path(str(servers)), Path(str(dockerfile)))


def fingerprint(sources: Sources) -> str:
    """A hash of everything the image is made from; a different one means the image is stale."""
    digest = hashlib.sha256(f"{SUITE}\0mcp=={mcp_version()}\0".encode())
    for path in sorted(_server_files(sources.servers)):
        digest.update(str(path.relative_to(sources.servers.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(sources.dockerfile.read_bytes())
    return digest.hexdigest()[:16]


def image_state(client: DockerClient, tag: str, sources: Sources) -> Literal["missing", "stale", "current"]:
    """Whether the image exists and was built from the current servers and Dockerfile."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return "missing"
    labels = image.labels or {}
    return "current" if labels.get(LABEL_FINGERPRINT) == fingerprint(sources) else "stale"


def build_image(
    tag: str,
    *,
    sources: Sources,
    method: Method = "auto",
    progress: Progress = print,
    data_dir: Path | None = None,
    client: DockerClient | None = None,
) -> str:
    """Build the sandbox image under `tag` and return its id; never pulls anything implicitly."""
    client = client or docker.from_env()
    previous = _image_id(client, tag)
    if _chosen(method, progress) == "dockerfile":
        built = _build_from_dockerfile(client, tag, sources, progress)
    else:
        built = _build_from_rootfs(client, tag, sources, data_dir or default_data_dir(), progress)
    if previous not in (None, built):
        _discard(client, str(previous), progress)
    return built


def build_gateway_image(
    checkout: Path,
    tag: str = GATEWAY_IMAGE,
    *,
    method: Method = "auto",
    progress: Progress = print,
    data_dir: Path | None = None,
    client: DockerClient | None = None,
) -> str:
    """Build the gateway's own image from `checkout`'s top-level Dockerfile and return its id: on its
    default BASE from a registry (dockerfile), or on `python_base` holding the checkout's dependencies (rootfs)."""
    client = client or docker.from_env()
    previous = _image_id(client, tag)
    buildargs: dict[str, Any] = {}
    if _chosen(method, progress) == "rootfs":
        project = tomllib.loads((checkout / "pyproject.toml").read_text("utf-8"))
        requirements = list(project["project"]["dependencies"])
        for extra in GATEWAY_EXTRAS:
            requirements += project["project"]["optional-dependencies"][extra]
        backend = project["build-system"]["requires"]
        cache = data_dir or default_data_dir()
        buildargs["BASE"] = python_base(requirements, backend, data_dir=cache, client=client, progress=progress)
    progress(f"dockerfile: building {checkout / 'Dockerfile'}" + (f" on {buildargs['BASE']}" if buildargs else ""))
    built = _docker_build(client, tag, progress, path=str(checkout), buildargs=buildargs)
    if previous not in (None, built):
        _discard(client, str(previous), progress)
    return built


def python_base(
    requirements: Sequence[str],
    build_requirements: Sequence[str],
    *,
    data_dir: Path,
    client: DockerClient,
    progress: Progress = print,
    tag: str = PYTHON_BASE,
) -> str:
    """Make `tag` a Python 3.11 image without a registry, built when missing or stale: the cached Debian
    tree with `python` and pip, `requirements` installed and `build_requirements` as wheels for pip."""
    made_of = [SUITE, repr(sorted(BASE_ENV.items())), *sorted(requirements), "", *sorted(build_requirements)]
    key = hashlib.sha256("\0".join(made_of).encode()).hexdigest()[:16]
    previous = _image_id(client, tag)
    if previous is not None and (client.images.get(tag).labels or {}).get(LABEL_FINGERPRINT) == key:
        progress(f"rootfs: reusing {tag}")
        return tag
    data_dir.mkdir(parents=True, exist_ok=True)
    tree = _debian_tree(data_dir, progress)
    cache = data_dir / f"base-{key}"
    for other in data_dir.glob("base-*"):
        if other != cache:
            shutil.rmtree(other, ignore_errors=True)  # what older requirements installed
    cache.mkdir(exist_ok=True)
    site = _wheels(cache / "site", tree, ["pip", *requirements], progress, install=True)
    wheels = _wheels(cache / "wheels", tree, build_requirements, progress, install=False)

    def add(tar: tarfile.TarFile) -> None:
        tar.add(tree, arcname=".", filter=_without_skipped)
        # Into the tree's own (empty) dist-packages: an archive naming a directory twice is refused.
        for child in sorted(site.iterdir()):
            tar.add(child, arcname=f"{BASE_SITE.lstrip('/')}/{child.name}", filter=_readable)
        tar.add(wheels, arcname=BASE_WHEELS.lstrip("/"), filter=_readable)
        # `python` as python:3.11-slim has it, for Dockerfiles, compose files and manifests that call it so.
        link = tarfile.TarInfo("usr/local/bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        tar.addfile(link)

    changes = [f"ENV {name}={value}" for name, value in BASE_ENV.items()]
    changes += [f"LABEL {LABEL_FINGERPRINT}={key}", 'CMD ["python3"]']
    built = _import_tree(client, tag, data_dir, add, changes, progress)
    if previous not in (None, built):
        _discard(client, str(previous), progress)
    return tag


def _chosen(method: Method, progress: Progress) -> Literal["dockerfile", "rootfs"]:
    """`method`, with `auto` resolved: dockerfile when a registry answers, else rootfs."""
    if method != "auto":
        return method
    chosen: Literal["dockerfile", "rootfs"] = "dockerfile" if _registry_answers() else "rootfs"
    progress(f"method: {chosen} (registry {'reachable' if chosen == 'dockerfile' else 'unreachable'})")
    return chosen


def _image_id(client: DockerClient, tag: str) -> str | None:
    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _discard(client: DockerClient, image_id: str, progress: Progress) -> None:
    """Remove the image the tag pointed at before, so rebuilds do not pile up untagged images."""
    try:
        client.images.remove(image_id)
    except docker.errors.APIError as error:
        # Still used by a running container, or tagged elsewhere: keeping it is harmless.
        progress(f"kept the previous image {image_id[:19]}: {error.explanation}")
    else:
        progress(f"removed the previous image {image_id[:19]}")


def _registry_answers() -> bool:
    """True when a container registry answers within two seconds (any HTTP status counts)."""
    try:
        with urllib.request.urlopen(REGISTRY_PROBE, timeout=2.0):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _build_from_dockerfile(client: DockerClient, tag: str, sources: Sources, progress: Progress) -> str:
    progress("dockerfile: sending gateway/sandbox/Dockerfile and servers/ as the build context")
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(sources.dockerfile, arcname="Dockerfile")
        tar.add(sources.servers, arcname="servers", filter=_readable)
    context.seek(0)
    return _docker_build(
        client,
        tag,
        progress,
        fileobj=context,
        custom_context=True,
        buildargs={"MCP_VERSION": mcp_version()},
        labels={LABEL_FINGERPRINT: fingerprint(sources)},
    )


def _docker_build(client: DockerClient, tag: str, progress: Progress, **build: Any) -> str:
    """`docker build` with docker-py's `build` arguments; the image's id, the build's lines to `progress`."""
    try:
        # forcerm: a failed step leaves no stopped container behind. The timeout bounds each read of
        # the build's output, and a silent pip step may run for minutes.
        image, logs = client.images.build(tag=tag, forcerm=True, timeout=int(_STEP_TIMEOUT), **build)
    except docker.errors.BuildError as error:
        tail = " | ".join(_build_lines(error.build_log)[-5:])
        raise ImageBuildError(f"docker build of {tag} failed: {error.msg}" + (f": {tail}" if tail else "")) from error
    for line in _build_lines(logs):
        progress(f"dockerfile: {line}")
    progress(f"built {tag} ({image.short_id})")
    return str(image.id)


def _build_lines(log: Iterable[object]) -> list[str]:
    """The text lines of a docker build's output entries."""
    chunks = (_COLOURS.sub("", str(entry.get("stream", ""))) for entry in log if isinstance(entry, dict))
    return [line.strip() for chunk in chunks for line in chunk.splitlines() if line.strip()]


def _build_from_rootfs(client: DockerClient, tag: str, sources: Sources, data_dir: Path, progress: Progress) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    base = _debian_tree(data_dir, progress)
    site = _site_packages(data_dir, base, progress)
    servers = _compiled_servers(sources.servers, data_dir, progress)

    def add(tar: tarfile.TarFile) -> None:
        tar.add(base, arcname=".", filter=_without_skipped)
        tar.add(site, arcname=SITE_DIR.lstrip("/"), filter=_readable)
        tar.add(servers, arcname=f"{GATEWAY_DIR.lstrip('/')}/servers", filter=_readable)

    changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
    changes += [f"LABEL {LABEL_FINGERPRINT}={fingerprint(sources)}", "USER 65534:65534", "WORKDIR /tmp"]
    return _import_tree(client, tag, data_dir, add, changes, progress)


def _import_tree(
    client: DockerClient,
    tag: str,
    data_dir: Path,
    add: Callable[[tarfile.TarFile], None],
    changes: list[str],
    progress: Progress,
) -> str:
    """`docker import` of the root filesystem that `add` writes, with Dockerfile `changes`; the image's id."""
    progress("rootfs: writing the image tarball")
    with tempfile.TemporaryDirectory(dir=data_dir) as scratch:
        tarball = Path(scratch) / "rootfs.tar"
        with tarfile.open(tarball, mode="w") as tar:
            add(tar)
        progress(f"rootfs: importing {tarball.stat().st_size // 2**20} MiB as {tag}")
        repository, version = _split_tag(tag)
        try:
            client.api.import_image(src=str(tarball), repository=repository, tag=version, changes=changes)
        except docker.errors.APIError as error:
            raise ImageBuildError(f"docker import of {tag} failed: {error.explanation}") from error
    image = client.images.get(tag)
    progress(f"built {tag} ({image.short_id})")
    return str(image.id)


def _split_tag(tag: str) -> tuple[str, str]:
    """`name:version` split at the version's colon (a registry host may carry a port colon too)."""
    name, colon, version = tag.rpartition(":")
    return (name, version) if colon and "/" not in version else (tag, "latest")


def _debian_tree(data_dir: Path, progress: Progress) -> Path:
    """The cached Debian root filesystem with the full Python 3 standard library."""
    tree = data_dir / f"{SUITE}-minbase"
    if tree.exists():
        progress(f"rootfs: reusing the Debian tree in {tree}")
        return tree
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed: apt-get install -y debootstrap")
    partial = data_dir / f"{SUITE}-minbase.partial"
    shutil.rmtree(partial, ignore_errors=True)
    progress(f"rootfs: debootstrap {SUITE} into {partial} (about a minute)")
    _run(["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(partial), MIRROR], "debootstrap")
    progress("rootfs: checking that asyncio, json and ssl import inside the tree")
    _run(["chroot", str(partial), "python3", "-c", "import asyncio, json, ssl"], "stdlib check")
    partial.rename(tree)
    return tree


def _site_packages(data_dir: Path, tree: Path, progress: Progress) -> Path:
    """The cached MCP SDK and its dependencies, as CPython 3.11 wheels for the image's glibc."""
    version = mcp_version()
    return _wheels(data_dir / f"site-mcp-{version}-cp311", tree, [f"mcp=={version}"], progress, install=True)


def _wheels(directory: Path, tree: Path, requirements: Sequence[str], progress: Progress, *, install: bool) -> Path:
    """`requirements` with their dependencies as CPython 3.11 wheels for the image's glibc and the Python
    in `tree`, installed into `directory` (`pip install --target`) or downloaded there; kept once complete."""
    if directory.exists():
        progress(f"rootfs: reusing {directory}")
        return directory
    partial = directory.with_name(f"{directory.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    arch = platform.machine()
    # Bookworm has glibc 2.36; naming every compatible manylinux tag keeps newer-glibc wheels out.
    platforms = [f"manylinux_2_{minor}_{arch}" for minor in range(36, 16, -1)] + [f"manylinux2014_{arch}"]
    verb = "install" if install else "download"
    python = _python_version(tree)
    progress(f"rootfs: pip {verb} {' '.join(requirements)} for Python {python} into {partial}")
    command = [sys.executable, "-c", _PIP_AS, python, verb, "--quiet", "--disable-pip-version-check"]
    command += ["--target" if install else "--dest", str(partial), "--only-binary=:all:", "--implementation", "cp"]
    command += ["--python-version", "3.11", "--abi", "cp311"]
    command += [arg for name in platforms for arg in ("--platform", name)]
    _run([*command, *requirements], f"pip {verb}")
    partial.rename(directory)
    return directory


def _python_version(tree: Path) -> str:
    """The full version of the Python in the Debian tree (`3.11.2`)."""
    code = "import platform; print(platform.python_version())"
    return _run(["chroot", str(tree), "python3", "-c", code], "reading the tree's Python version").strip()


def _compiled_servers(source: Path, data_dir: Path, progress: Progress) -> Path:
    """A fresh copy of servers/ with bytecode, since the image's root is read-only at run time."""
    if not (source / "__init__.py").exists():
        raise ImageBuildError(f"{source} is not a Python package (no __init__.py)")
    stage = data_dir / "servers.stage"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(source, stage, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    progress(f"rootfs: compiling {source}")
    compileall.compile_dir(str(stage), quiet=1)
    return stage


def _server_files(servers: Path) -> Iterator[Path]:
    return (p for p in servers.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _run(command: list[str], stage: str) -> str:
    """Run `command` to completion; its standard output, or ImageBuildError naming `stage`."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_STEP_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ImageBuildError(f"{stage} failed: {error}") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ImageBuildError(f"{stage} failed with exit code {done.returncode}: " + " | ".join(tail))
    return done.stdout


def _without_skipped(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = info.name.removeprefix("./")
    return None if any(name.startswith(prefix) for prefix in _SKIPPED) else info


def _readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    # Copied files keep the builder's modes; the sandbox user (nobody) must read them all.
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode |= 0o555 if info.isdir() else 0o444
    return info


def main(argv: list[str] | None = None) -> int:
    """Build the sandbox image when it is missing or stale (or always with --force), or the gateway's own image."""
    parser = argparse.ArgumentParser(prog="python -m gateway.sandbox.image", description=main.__doc__)
    parser.add_argument("--tag", help=f"image tag (default {DEFAULT_IMAGE}, with --gateway {GATEWAY_IMAGE})")
    parser.add_argument("--method", choices=["auto", "dockerfile", "rootfs"], default="auto")
    parser.add_argument("--data-dir", type=Path, default=None, help="build cache (default ~/.cache/...)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the image is current")
    parser.add_argument(
        "--gateway",
        type=Path,
        metavar="CHECKOUT",
        help="build the gateway's own image from CHECKOUT's top-level Dockerfile instead (always)",
    )
    args = parser.parse_args(argv)
    if args.gateway is not None:
        tag = args.tag or GATEWAY_IMAGE
        return gateway_command(args.gateway, tag, args.method, data_dir=args.data_dir)
    return build_command(args.tag or DEFAULT_IMAGE, args.method, force=args.force, data_dir=args.data_dir)


def build_command(tag: str, method: Method, *, force: bool, data_dir: Path | None = None) -> int:
    """`sandbox build`: build image `tag` when it is missing or stale (always when `force`); exit status."""

    def build(client: DockerClient) -> None:
        sources = Sources.installed()
        state = image_state(client, tag, sources)
        if state == "current" and not force:
            print(f"{tag} is current")
            return
        print(f"{tag} is {state}: building" if state != "current" else f"{tag}: rebuilding (--force)")
        build_image(tag, sources=sources, method=method, progress=_printed, data_dir=data_dir, client=client)

    return _exit_status(build)


def gateway_command(checkout: Path, tag: str, method: Method, *, data_dir: Path | None = None) -> int:
    """Build the gateway's own image `tag` from `checkout`; exit status."""

    def build(client: DockerClient) -> None:
        build_gateway_image(checkout, tag, method=method, progress=_printed, data_dir=data_dir, client=client)

    return _exit_status(build)


def _printed(line: str) -> None:
    print(line, flush=True)


def _exit_status(build: Callable[[DockerClient], None]) -> int:
    """Run `build` with a client of the local daemon: 0, or 1 with the reason on stderr."""
    try:
        build(docker.from_env())
    except docker.errors.DockerException as error:
        print(f"Docker is not reachable: {error}", file=sys.stderr)
        return 1
    except ImageBuildError as error:
        print(error.message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
