"""Which files the commands wrote into the workspace that no read case damages: the list
the report ends with, found from what the commands wrote (not from a list kept by hand),
so that a new file shows up there until a case reads it back damaged, or it is known to be
read by no command (a plot, TensorBoard's projector files)."""
from __future__ import annotations

import re
from pathlib import Path

from tests.faults.cases_read import TARGETS
from tests.faults.workspace import Workspace

#: units that hold what others wrote (an earlier version's files, a reference run)
NOT_WRITTEN_HERE = ("legacy", "reference")


class _Built:
    """The workspace's units as a case's scene offers them, without copies and without
    building a unit that is not there (:class:`LookupError`)."""

    def __init__(self, ws: Workspace):
        self.ws = ws

    def unit(self, name: str) -> Path:
        if not (self.ws.units / name).exists():
            raise LookupError(name)
        return self.ws.units / name

    @property
    def cache(self) -> Path:
        return self.unit("cache")


def generic(path: Path) -> str:
    """What kind of file ``path`` is: its folder and name, with a run's (or a record's)
    folder written ``<run>``, a split's name ``<split>``, cache keys ``<key>`` and numbers
    ``N`` (``<run>/ckpt-N.index`` is any run's checkpoint index)."""
    folder = path.parent
    parent = "<run>" if (folder / "config.json").is_file() or (
        folder / "metrics.json").is_file() else folder.name
    text = f"{parent}/{path.name}"
    text = re.sub(r"\b(train|valid|test)(?=[-.])", "<split>", text)
    return re.sub(r"\d+", "N", re.sub(r"[0-9a-f]{12,}", "<key>", text))


def unread(ws: Workspace) -> list[str]:
    """The kinds of file (:func:`generic`) in the built units that no read case damages."""
    view, damaged = _Built(ws), []
    for target in TARGETS:
        try:
            damaged.append(target.locate(view))
        except (LookupError, StopIteration, ValueError, FileNotFoundError):
            continue
    covered = {generic(p) for p in damaged if p.is_file()}
    folders = [p for p in damaged if p.is_dir()]
    found = set()
    for path in sorted(ws.units.rglob("*")):
        rel = path.relative_to(ws.units)
        if not path.is_file() or rel.parts[0] in NOT_WRITTEN_HERE or \
                any(path.is_relative_to(folder) for folder in folders):
            continue
        if generic(path) not in covered:
            found.add(generic(path))
    return sorted(found)
