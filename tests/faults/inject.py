"""Faults made inside the process, for the places a tmpfs cannot isolate: a disk that fills
at one chosen write (``ENOSPC`` from ``fsync``, from the ``sendfile`` of ``shutil.copyfile``,
or from the write of ``Path.write_bytes`` after its file was truncated), and a run
directory deleted while its training runs. Each counts its ``hits``: a fault never reached
says nothing about the command (the case is skipped)."""
from __future__ import annotations

import errno
import os
import pathlib
import shutil

from tests.faults.files import written_as


def _path_of(fd: int) -> str:
    try:
        return written_as(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return ""


def _no_space() -> OSError:
    """The error a full disk gives a write: no file name (the kernel's is a file
    descriptor's)."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class NoSpace:
    """While entered: ``ENOSPC`` from every ``fsync`` and ``sendfile`` into, and every
    ``Path.write_bytes`` of, a path containing ``match`` (a temporary ``.<name>.<pid>.tmp``
    counting as the file it is written for); ``write_bytes`` truncates its file first, as
    ``open(..., "wb")`` does."""

    def __init__(self, match: str):
        self.match, self.hits = match, 0

    def _hit(self, path: str) -> bool:
        if self.match in path:
            self.hits += 1
            return True
        return False

    def __enter__(self) -> "NoSpace":
        fsync, sendfile, write_bytes = os.fsync, os.sendfile, pathlib.Path.write_bytes
        self._saved = fsync, sendfile, write_bytes

        def full_fsync(fd):
            if self._hit(_path_of(fd)):
                raise _no_space()
            return fsync(fd)

        def full_sendfile(out_fd, *args, **kwargs):
            if self._hit(_path_of(out_fd)):
                raise _no_space()
            return sendfile(out_fd, *args, **kwargs)

        def full_write_bytes(path, data):
            if self._hit(written_as(str(path))):
                with open(path, "wb"):
                    pass
                raise _no_space()
            return write_bytes(path, data)

        os.fsync, os.sendfile, pathlib.Path.write_bytes = (full_fsync, full_sendfile,
                                                           full_write_bytes)
        return self

    def __exit__(self, *exc) -> None:
        os.fsync, os.sendfile, pathlib.Path.write_bytes = self._saved


class RunRemoved:
    """While entered: the run directory ``run_dir`` deleted (as a user cleaning up the wrong
    folder would) just before the first training checkpoint is written."""

    def __init__(self, run_dir: pathlib.Path):
        self.run_dir, self.hits = run_dir, 0

    def __enter__(self) -> "RunRemoved":
        from train.trainer import Trainer

        save = self._save = Trainer._save_training

        def removed_first(trainer, *args, **kwargs):
            if not self.hits:
                self.hits += 1
                shutil.rmtree(self.run_dir)
            return save(trainer, *args, **kwargs)

        Trainer._save_training = removed_first
        return self

    def __exit__(self, *exc) -> None:
        from train.trainer import Trainer
        Trainer._save_training = self._save
