"""A fault case, the folder it plays in, and the command it runs.

A :class:`Case` names its category (``kind``), the file at fault (``target``), the command
and the fault; its ``setup`` copies the workspace units it needs into the case's folder
(:meth:`Scene.unit`), applies the fault there and returns the :class:`Step` to run: the
command line, what the command may rewrite, how to tell a right result from a wrong one,
how to lift the fault, and the next normal command.
"""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager

from tests.faults.outcomes import Result
from tests.faults.workspace import Workspace


@dataclass(frozen=True)
class Case:
    kind: str                      #: the category (:data:`tests.faults.cases.KINDS`)
    target: str                    #: the file at fault, e.g. ``run/config.json``
    command: str                   #: the module run, e.g. ``evaluate.perplexity``
    fault: str                     #: what is done to it
    setup: Callable[["Scene"], "Step"] = field(compare=False, repr=False)
    variant: str = ""              #: tells apart two faults of one kind on one target
    known: str = ""                #: the known fault this case shows, if it is one
    quick: bool = False            #: in ``--quick``'s subset

    @property
    def name(self) -> str:
        return " ".join(filter(None, (self.kind, self.target, self.command, self.variant)))


@dataclass
class Step:
    """What a case runs and how its result is judged."""

    argv: list[str]
    #: the damaged file, or the folder at fault: left out of the good files compared
    target: Path | None = None
    #: what the command may rewrite (globs on paths relative to the case folder, or names)
    outputs: tuple[str, ...] = ()
    #: for an exit 0: why the result is wrong, or None when it is right
    check: Callable[[Result], str | None] | None = None
    #: what the error line must name (one of them)
    names: tuple[str, ...] = ()
    #: makes the fault go away (frees the disk, restores the file) before the next command
    lift: Callable[[], None] | None = None
    #: the next normal command (module, argv); by default the same command again
    follow: tuple[str, list[str]] | None = None
    #: when the next command runs: after a ``failure`` (or a kill), or after a ``success``
    follow_on: str = "failure"
    #: a kill point (:mod:`tests.faults.killer`): run in a process of its own
    kill: dict | None = None
    #: an in-process fault around the command (an injected error, a folder removed)
    fault: Callable[[], ContextManager] | None = None


class Scene:
    """The folder of one case (``root``), the units copied into it and the mounts and
    other faults to undo at its end (``stack``)."""

    def __init__(self, ws: Workspace, root: Path, stack: contextlib.ExitStack):
        self.ws, self.root, self.stack = ws, Path(root), stack
        self.copies: dict[str, Path] = {}
        #: new folders a command writes into (their files are checked too)
        self.folders: list[Path] = []

    def unit(self, name: str) -> Path:
        """A fresh copy of workspace unit ``name`` in this case's folder."""
        if name not in self.copies:
            self.copies[name] = self.root / name
            shutil.copytree(self.ws.unit(name), self.copies[name], symlinks=True)
        return self.copies[name]

    @property
    def cache(self) -> Path:
        return self.unit("cache")

    def folder(self, name: str) -> Path:
        """A new, empty folder of this case that a command writes into."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        self.folders.append(path)
        return path

    @property
    def roots(self) -> list[Path]:
        """Every folder whose files the case compares before and after."""
        return list(self.copies.values()) + self.folders

    def pristine(self, path: Path) -> Path:
        """The workspace's good copy of ``path`` (a file in one of this case's units)."""
        unit = Path(path).relative_to(self.root).parts[0]
        return self.ws.unit(unit) / Path(path).relative_to(self.copies[unit])

    def restore(self, *paths: Path) -> Callable[[], None]:
        """The function that puts the good copies of ``paths`` back."""
        def put_back() -> None:
            for path in paths:
                good = self.pristine(path)
                if path.is_dir() or good.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                    shutil.copytree(good, path)
                else:
                    shutil.copyfile(good, path)
        return put_back

    def enter(self, context: ContextManager):
        """Enter ``context`` (a mount) until the case ends; what it yields."""
        return self.stack.enter_context(context)
