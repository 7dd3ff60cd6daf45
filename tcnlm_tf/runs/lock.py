"""One writer per run directory: an exclusive ``flock`` on ``<run>/.lock``.

``train.run`` holds it for as long as it trains (and ``train.export`` the model directory's
while it picks a version number and writes it), so a second training on the same run (a
resubmitted cluster job, the same command in two terminals, ``evaluate.compare`` beside a
manual run) cannot interleave its checkpoints and metrics with the first one's. The
operating system drops the lock when its process ends, however it ends, so a crashed run
never leaves a stale lock behind. The file records the holder (host and process id) for the
error message. ``flock`` is advisory and local to one machine's kernel on some network
filesystems; on those it still separates processes of one machine.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

LOCK_FILE = ".lock"
#: how long a lock refused without ``wait`` is tried again (see :func:`try_lock`)
PROBE_RETRY_SECONDS = 0.2


class RunLock:
    """A held lock on a run directory; :meth:`release` (or process exit) frees it."""

    def __init__(self, directory: Path, handle: IO[str]):
        self.directory = directory
        self._handle = handle

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()

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
    handle.seek(0)
    handle.truncate()
    handle.write(f"{socket.gethostname()} {os.getpid()}\n")
    handle.flush()
    return RunLock(directory, handle)


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
