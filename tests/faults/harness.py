"""Running a fault case and judging it: the good files compared before and after, the
command run as the command line runs it, the next normal command after the fault is lifted,
and the outcome (:func:`tests.faults.outcomes.classify`)."""
from __future__ import annotations

import contextlib
import gc
import os
import shlex
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.faults.cases_write import Unavailable
from tests.faults.execute import in_process, in_subprocess
from tests.faults.files import damaged, debris, digests, matches
from tests.faults.outcomes import SKIPPED, HANG, Result, classify, crash
from tests.faults.readers import module_of
from tests.faults.scene import Case, Scene, Step
from tests.faults.workspace import Workspace


@dataclass
class Outcome:
    """How one case ended, as the report shows it."""

    case: Case
    verdict: str                                 #: one of tests.faults.outcomes.ORDER
    detail: str
    seconds: float
    command: str = ""                            #: the command line, paths shortened
    stderr: list[str] = field(default_factory=list)   #: its last stderr lines


def command_line(module: str, argv: list[str], folder: Path) -> str:
    """``python -m module argv`` with the case folder written ``<case>``."""
    text = " ".join(shlex.quote(a) for a in ["python", "-m", module, *argv])
    return text.replace(str(folder), "<case>")


def _allowed(step: Step, roots: list[Path]) -> Callable[[str], bool]:
    """What the command may change: the file or folder at fault and its outputs."""
    target = str(step.target) if step.target else None

    def allowed(path: str) -> bool:
        if target and (path == target or path.startswith(target + "/")):
            return True
        return matches(path, step.outputs, roots)
    return allowed


def _next(case: Case, step: Step, timeout: float) -> Result:
    """The next normal command, once the fault is lifted."""
    if step.lift:
        step.lift()
    module, argv = step.follow or (module_of(case.command), step.argv)
    return in_process(module, argv, timeout)


def _judged(step: Step, result: Result, scene: Scene, before: dict, lost: list[str],
            after: Result | None = None) -> tuple[str, str]:
    """The outcome of ``result``: the good files (digests ``before``) compared with now,
    what was left behind, the check of an exit 0 and the next command (``after``)."""
    roots = scene.roots
    now = digests(roots)
    lost = list(dict.fromkeys(lost + damaged(before, now, roots, _allowed(step, roots))))
    wrong = None
    if result.code == 0 and step.check:
        try:
            wrong = step.check(result)
        except Exception as error:   # noqa: BLE001 - outputs that do not read back
            wrong = f"its outputs do not read back ({type(error).__name__}: {error})"[:300]
    return classify(result, lost, debris(before, now, roots), wrong, step.names, after)


def play(case: Case, scene: Scene, step: Step, timeout: float) -> tuple[str, str, Result]:
    """Run ``step`` of ``case``; its outcome, detail and the result the user saw last."""
    module = module_of(case.command)
    before = digests(scene.roots)
    if step.kill:
        killed = in_subprocess(module, step.argv, timeout, scene.root, step.kill)
        if killed.timed_out:
            return HANG, f"no end within {timeout:g} s (before its kill point)", killed
        if killed.code != -signal.SIGKILL:
            return SKIPPED, (f"kill point not reached: exit {killed.code}, "
                             f"{killed.last_line[:200]}"), killed
        lost = damaged(before, digests(scene.roots), scene.roots, _allowed(step, scene.roots))
        result = _next(case, step, timeout)
        return (*_judged(step, result, scene, before, lost), result)
    fault = step.fault() if step.fault else None
    result = in_process(module, step.argv, timeout, fault)
    if fault is not None and not fault.hits and not result.timed_out:
        return SKIPPED, f"the injected fault was never reached (exit {result.code})", result
    after = None
    due = "success" if result.code == 0 else "failure"
    if not result.timed_out and not crash(result) and step.follow_on == due:
        after = _next(case, step, timeout)
    return (*_judged(step, result, scene, before, [], after), result)


def run_case(case: Case, ws: Workspace, folder: Path, timeout: float) -> Outcome:
    """Set ``case`` up in ``folder`` (a new one), run and judge it."""
    folder.mkdir(parents=True)
    here, start = Path.cwd(), time.perf_counter()
    os.chdir(folder)      # relative default outputs (./saved_models, ./.cache) land here
    try:
        with contextlib.ExitStack() as stack:
            scene = Scene(ws, folder, stack)
            os.environ["TCNLM_CACHE_DIR"] = str(scene.cache)
            try:
                step = case.setup(scene)
            except Unavailable as why:
                return Outcome(case, SKIPPED, str(why), time.perf_counter() - start)
            except Exception as error:   # noqa: BLE001 - a fault that could not be set up
                return Outcome(case, SKIPPED, f"set-up failed: {type(error).__name__}: "
                               f"{error}"[:300], time.perf_counter() - start)
            try:
                kind, detail, result = play(case, scene, step, timeout)
            except Exception as error:   # noqa: BLE001 - the harness's own failure
                return Outcome(case, SKIPPED, f"harness error: {type(error).__name__}: "
                               f"{error}"[:300], time.perf_counter() - start)
            return Outcome(case, kind, detail, time.perf_counter() - start,
                           command_line(module_of(case.command), step.argv, folder),
                           result.tail())
    finally:
        os.chdir(here)
        gc.collect()


def run_cases(cases: list[Case], ws: Workspace, timeout: float,
              progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Every case, one at a time, each in a folder of its own under the workspace."""
    outcomes = []
    ws.root.mkdir(parents=True, exist_ok=True)
    folders = Path(tempfile.mkdtemp(prefix="cases-", dir=ws.root))
    for number, case in enumerate(cases):
        outcomes.append(run_case(case, ws, folders / f"{number:03d}", timeout))
        if progress:
            progress(outcomes[-1])
    return outcomes
