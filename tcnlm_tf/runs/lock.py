"""One writer per run directory: an exclusive ``flock`` on ``<run>/.lock``.

``train.run`` holds it for as long as it trains (and ``train.export`` the model directory's
while it picks a version number and writes it), so a second training on the same run (a
resubmitted cluster job, the same command in two terminals, ``evaluate.compare`` beside a
manual run) cannot interleave its checkpoints and metrics with the first one's. The
operating system drops the lock when its process ends, however it ends, so a crashed run
never leaves a stale lock behind. The file records the holder (host and process id) for the
error message. ``flock`` is advisory and local to one machine's kernel on some network
filesystems; on those it still separates processes of one machine.

A held lock also tells its holder whether the directory is still the one it locked
(:meth:`RunLock.intact`): a directory deleted, moved or replaced by another one takes its lock
file with it, so the path no longer leads to the file the lock is on. :func:`held_lock` finds
this process's lock on a directory, for the code that writes it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

LOCK_FILE = ".lock"
#: how long a lock refused without ``wait`` is tried again (see :func:`try_lock`)
PROBE_RETRY_SECONDS = 0.2


#: this process's held locks, by :func:`_key`
_HELD: dict[tuple[str, str], "RunLock"] = {}


def _key(directory: Path | str, name: str) -> tuple[str, str]:
    """The key of a lock in :data:`_HELD`: the directory's real path (one directory reached
    through a symlink or a relative path is one key) and the lock file's name."""
    return os.path.realpath(directory), name


def file_identity(path: Path | str) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of what ``path`` leads to (symlinks followed), None when nothing
    is there or a component of it is not a directory."""
    try:
        return _identity(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _identity(status: os.stat_result) -> tuple[int, int]:
    """What tells one file from every other while it exists: its device and inode."""
    return status.st_dev, status.st_ino


class RunLock:
    """A held lock on a run directory; :meth:`release` (or process exit) frees it."""

    def __init__(self, directory: Path, handle: IO[str], name: str = LOCK_FILE):
        self.directory = directory
        self.name = name
        self._handle = handle
        # the directory held open too: while the lock is held, no directory made at its
        # path after it was deleted can have its identity
        self._directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        #: ``(st_dev, st_ino)`` of the lock file this lock is on, and of its directory
        self.identity = _identity(os.fstat(handle.fileno()))
        self.directory_identity = _identity(os.fstat(self._directory_fd))

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.directory / self.name

    def intact(self) -> bool:
        """Whether the lock file's path still leads to the file this lock is on: False once
        the directory was deleted, moved or replaced (or the lock file alone was)."""
        return file_identity(self.path) == self.identity

    def release(self) -> None:
        if _HELD.get(_key(self.directory, self.name)) is self:
            del _HELD[_key(self.directory, self.name)]
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            os.close(self._directory_fd)

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def try_lock(directory: Path | str, wait: bool = False, name: str = LOCK_FILE
             ) -> RunLock | None:
    """Lock ``directory`` (created if needed) for this process, through its file ``name``;
    None when another process holds it, or with ``wait`` block until it is free. Without
    ``wait`` a refusal is retried for :data:`PROBE_RETRY_SECONDS`, the longest that
    :func:`is_held`'s instant probe (by ``train.status``) can hold a shared lock."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    handle = open(directory / name, "a+", encoding="utf-8")
    deadline = time.monotonic() + PROBE_RETRY_SECONDS
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.01)
    _record_holder(handle, directory / name)
    lock = _HELD[_key(directory, name)] = RunLock(directory, handle, name)
    return lock


def _record_holder(handle: IO[str], path: Path) -> None:
    """Write this process's host and id into the locked file ``handle`` at ``path``, for
    :func:`holder`. A write that fails (a full disk) frees the lock and raises an
    ``OSError`` naming ``path``: the buffered write's own error names no file."""
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{socket.gethostname()} {os.getpid()}\n")
        handle.flush()
    except OSError as error:
        with contextlib.suppress(OSError):  # closing flushes again, fails again, and
            handle.close()                  # closes (and so unlocks) the file all the same
        raise OSError(error.errno, error.strerror, str(path)) from None


def held_lock(directory: Path | str, name: str = LOCK_FILE) -> RunLock | None:
    """This process's lock on ``directory`` (taken by :func:`try_lock`, not yet released),
    or None."""
    return _HELD.get(_key(directory, name))


def is_held(directory: Path | str, name: str = LOCK_FILE) -> bool:
    """Whether a process holds the lock of ``directory`` now (a training under way), found
    without keeping it: a shared lock is refused while another process holds the exclusive
    one, and, when granted, is dropped at once (:func:`try_lock` retries over that instant)."""
    try:
        handle = open(Path(directory) / name, encoding="utf-8")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def holder(directory: Path | str) -> str:
    """Who holds the lock of ``directory``, as its lock file says ("host pid"), for
    messages."""
    try:
        host, pid = (Path(directory) / LOCK_FILE).read_text(encoding="utf-8").split()[:2]
    except (OSError, ValueError):
        return "another process"
    return f"process {pid} on {host}"
