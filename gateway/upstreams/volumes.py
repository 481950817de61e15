"""Size-limited workspace file systems: one ext4 image per workspace, loop-mounted on its directory.

Both writers of a workspace (sandbox containers through their bind mount, and session servers
on the host) write into the same mounted file system, so both meet the same hard limit: a full
file system answers "No space left on device" and nothing more is written. Mounting needs root
(and `mkfs.ext4`, `mount` and loop devices); `probe` says whether it works here and why not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from gateway.errors import GatewayError

# Enough inodes for many small files (one per 16 KiB), no journal and no reserved blocks: the
# file system's own metadata takes about 4 % of the image, all of it inside the limit.
_MKFS = ["mkfs.ext4", "-q", "-F", "-O", "^has_journal,^resize_inode", "-m", "0", "-b", "4096", "-i", "16384"]
# Nothing in a workspace may be a device node or gain privileges; programs are run by an
# interpreter, never executed from it.
_MOUNT_OPTIONS = "loop,nosuid,nodev,noexec"
_PROBE_SIZE = 4 * 1024 * 1024


class VolumeError(GatewayError):
    """A workspace file system could not be made, mounted or unmounted."""


def _run(*command: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise VolumeError(f"{command[0]} failed: {error}") from None
    if done.returncode != 0:
        raise VolumeError(f"{' '.join(command[:2])} failed: {(done.stderr or done.stdout).strip()[:300]}")


def create(image: Path, size: int, owner: tuple[int, int]) -> None:
    """A fresh, sparse image of `size` bytes holding an empty file system whose root `owner` owns."""
    with image.open("wb") as file:
        file.truncate(size)
    os.chmod(image, 0o600)
    _run(*_MKFS, "-E", f"root_owner={owner[0]}:{owner[1]}", str(image))


def mount(image: Path, directory: Path) -> None:
    """Mount `image` on `directory`; the root of the file system is made private to its owner."""
    _run("mount", "-o", _MOUNT_OPTIONS, str(image), str(directory))
    lost = directory / "lost+found"
    if lost.is_dir():
        lost.rmdir()
    os.chmod(directory, 0o700)


def move(source: Path, target: Path) -> None:
    """Move the file system on `source` to `target` (an empty directory): bound there, then detached
    from `source`; a container that bound `source` before keeps seeing the same file system."""
    # A bind keeps the mount's nosuid, nodev and noexec; `mount --move` would fail under a shared parent.
    _run("mount", "--bind", str(source), str(target))
    _run("umount", "--lazy", str(source))


def unmount(directory: Path) -> None:
    """Detach the file system on `directory`; a process still inside keeps it until it leaves."""
    _run("umount", "--lazy", str(directory))


def mounted_under(root: Path) -> list[Path]:
    """Mount points at or below `root`, deepest first."""
    prefix = str(root.resolve())
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        for line in table:
            # Field 5 is the mount point, with spaces and the like written as octal escapes.
            point = re.sub(r"\\([0-7]{3})", lambda escape: chr(int(escape[1], 8)), line.split(" ")[4])
            if point == prefix or point.startswith(prefix + "/"):
                points.append(Path(point))
    return sorted(points, key=lambda path: len(path.parts), reverse=True)


def probe(scratch: Path) -> str | None:
    """None when workspaces can be size-limited here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "the gateway does not run as root, so it cannot mount a file system per workspace"
    missing = [tool for tool in ("mkfs.ext4", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    image, directory = scratch.with_suffix(".img"), scratch
    try:
        directory.mkdir(parents=True, exist_ok=True)
        create(image, _PROBE_SIZE, (os.getuid(), os.getgid()))
        mount(image, directory)
        unmount(directory)
    except (VolumeError, OSError) as error:
        return f"mounting a file system image failed ({error})"
    finally:
        image.unlink(missing_ok=True)
        if directory.is_dir() and not os.path.ismount(directory):
            shutil.rmtree(directory, ignore_errors=True)
    return None
