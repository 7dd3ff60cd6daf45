"""What a fault case ends in, decided from what the user saw: the exit status, the last
lines of stderr, the good files before and after, and the next normal command.

Pure Python (no TensorFlow), so that the classifier's own tests run in the fast suite.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: a non-zero exit whose last stderr line is the one ``error:`` line, nothing good damaged
ONE_LINE = "one-line"
#: exit 0 with the right outputs (a damaged cache prepared again with a notice, a resume
#: from an older checkpoint with a warning, ...)
CORRECT = "correct"
#: a one-line error that names neither the file nor the folder at fault
VAGUE = "vague one-line"
#: a good file changed, missing or left half-written, debris left behind, a wrong result
#: reported as success, or a next normal command that no longer works
LOST = "lost or silently wrong"
#: no end within the timeout
HANG = "hang"
#: a traceback, a crash by a signal, or a non-zero exit without one ``error:`` line
TRACEBACK = "traceback"
#: the fault could not be set up here (no tmpfs, a kill point never reached): not counted
SKIPPED = "skipped"

GOOD = (ONE_LINE, CORRECT)
BAD = (LOST, HANG, TRACEBACK, VAGUE)
#: the order of the report's columns
ORDER = (ONE_LINE, CORRECT, VAGUE, LOST, HANG, TRACEBACK, SKIPPED)

#: lines TensorFlow's runtime writes itself before its log level applies (not the project's)
RUNTIME_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} )")
TRACEBACK_HEAD = "Traceback (most recent call last)"
#: where the project's own code is: a traceback's frames there are shown in the report
ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class Result:
    """How one command ended: exit status (negative: killed by that signal; None when it
    timed out), its output, and (in-process) what its ``main`` returned."""

    code: int | None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    returned: object = None
    timed_out: bool = False

    def lines(self) -> list[str]:
        """The non-blank stderr lines, without TensorFlow's own runtime log lines."""
        return [line for line in self.stderr.splitlines()
                if line.strip() and not RUNTIME_LOG.match(line)]

    @property
    def last_line(self) -> str:
        lines = self.lines()
        return lines[-1] if lines else ""

    def tail(self, count: int = 5) -> list[str]:
        """The last ``count`` stderr lines, for the report, after the traceback's deepest
        frame in the project's own code (not a library's), where there is one."""
        frames = [line for line in self.lines() if line.strip().startswith(f'File "{ROOT}')
                  and "site-packages" not in line]
        last = self.lines()[-count:]
        return ([frames[-1].strip()] if frames and frames[-1] not in last else []) + last


def is_error_line(line: str) -> bool:
    """The project's ``error: ...`` or argparse's ``prog: error: ...``."""
    return line.startswith("error: ") or ": error: " in line


def one_error_line(result: Result) -> bool:
    """Whether stderr ends in the one error line (warnings before it are allowed)."""
    lines = result.lines()
    errors = [line for line in lines if is_error_line(line)]
    return bool(lines) and len(errors) == 1 and is_error_line(lines[-1])


def crash(result: Result) -> str | None:
    """Why ``result`` is a crash, or None: a traceback (its last line), a signal, or a
    non-zero exit without one error line."""
    if TRACEBACK_HEAD in result.stderr:
        after = result.stderr.split(TRACEBACK_HEAD)[-1]
        last = [line for line in after.splitlines() if line.strip()]
        return "traceback: " + (last[-1].strip() if last else "?")
    if result.code is not None and result.code < 0:
        return f"killed by signal {-result.code}"
    if result.code not in (0, None) and not one_error_line(result):
        return f"exit status {result.code} without one error line (last: {result.last_line!r})"
    return None


def notice(result: Result) -> str:
    """The first warning or note the command printed (what a correct fallback says)."""
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        if re.match(r"\s*(warning|note)\b", line) or "preparing it again" in line:
            return line.strip()
    return ""


def _later(kind: str, detail: str, after: Result | None) -> tuple[str, str]:
    """``(kind, detail)`` unless the next normal command (``after``) failed."""
    if after is None or after.code == 0:
        return kind, detail
    if after.timed_out:
        return HANG, "the next command hangs"
    why = crash(after)
    if why:
        return TRACEBACK, f"the next command ends in a {why}"
    return LOST, f"the next command fails: {after.last_line}"


def classify(result: Result, lost: list[str] = (), debris: list[str] = (),
             wrong: str | None = None, names: tuple[str, ...] = (),
             after: Result | None = None) -> tuple[str, str]:
    """The outcome of a case and a one-line detail.

    ``lost``: good files changed, missing or no longer readable; ``debris``: leftovers
    (temporary files, half-written or orphaned files); ``wrong``: for an exit 0, why its
    outputs are wrong; ``names``: what the error line must name (one of them), else it is
    :data:`VAGUE`; ``after``: the next normal command, run once the fault was lifted."""
    if result.timed_out:
        return HANG, f"no end within {result.seconds:.0f} s"
    why = crash(result)
    if why:
        return TRACEBACK, why
    if lost:
        return LOST, "damaged: " + "; ".join(lost[:3])
    if debris:
        return LOST, "left behind: " + "; ".join(debris[:3])
    if result.code == 0:
        if wrong:
            return LOST, "reported success, but " + wrong
        return _later(CORRECT, notice(result), after)
    line = result.last_line
    if names and not any(name and name in line for name in names):
        return _later(VAGUE, line, after)
    return _later(ONE_LINE, line, after)
