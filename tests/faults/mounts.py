"""Full disks and read-only folders, as the kernel makes them.

As root, ``chmod`` stops no write, and a full disk cannot be faked by permissions: a folder
is made full by mounting a small ``tmpfs`` on it (its files copied in) and filling it to the
brim, and read-only by a bind mount of it onto itself remounted ``ro``. Both need root and
``mount``; :func:`unavailable` says why they cannot be used here, and the cases that need
them are then skipped.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from tests.faults.files import FILLER

#: room on a full disk's tmpfs beyond its files before it is filled, and after it is freed
SLACK = 2 << 20
ROOMY = "512m"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(directory: Path) -> None:
    """Unmount ``directory``; lazily where a file the process keeps open (a TensorFlow
    event writer) holds it."""
    if subprocess.run(["umount", str(directory)], capture_output=True).returncode:
        subprocess.run(["umount", "--lazy", str(directory)], capture_output=True)


@functools.lru_cache(maxsize=None)
def unavailable() -> str | None:
    """Why tmpfs and read-only bind mounts cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "not root: tmpfs and read-only bind mounts need root"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", tmp)
        except (OSError, subprocess.CalledProcessError) as error:
            return f"mount -t tmpfs failed: {getattr(error, 'stderr', '') or error}"
        _umount(Path(tmp))
    return None


def _size(directory: Path) -> int:
    """The bytes a tmpfs needs for the files of ``directory`` (whole pages)."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in directory.rglob("*") if p.is_file())


def _fill(directory: Path, room: int) -> None:
    """Fill the tmpfs at ``directory`` to the brim, then give back ``room`` bytes."""
    block = b"\0" * 4096
    with open(directory / FILLER, "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(block)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
        if room:
            filler.truncate(max(0, filler.tell() - room))


@contextlib.contextmanager
def full_disk(directory: Path, room: int = 0) -> Iterator[Callable[[], None]]:
    """``directory`` (created if missing) on a tmpfs of its own holding its files, full but
    for ``room`` bytes; yields the function that frees the disk (the filler removed, the
    tmpfs grown), and unmounts at the end (the folder is then empty)."""
    directory.mkdir(parents=True, exist_ok=True)
    aside = directory.with_name(directory.name + ".aside")
    directory.rename(aside)
    directory.mkdir()
    _mount("-t", "tmpfs", "-o", f"size={_size(aside) + SLACK + room}", "tmpfs", str(directory))
    try:
        shutil.copytree(aside, directory, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(aside)
        _fill(directory, room)

        def free() -> None:
            (directory / FILLER).unlink(missing_ok=True)
            _mount("-o", f"remount,size={ROOMY}", str(directory))

        yield free
    finally:
        _umount(directory)


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[Callable[[], None]]:
    """``directory`` (created if missing) read-only through a bind mount onto itself; yields
    the function that makes it writable again (the mount removed)."""
    directory.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(directory), str(directory))
    mounted = [True]

    def lift() -> None:
        if mounted[0]:
            _umount(directory)
            mounted[0] = False

    try:
        _mount("-o", "remount,ro,bind", str(directory))
        yield lift
    finally:
        lift()
