"""What a run of the fault harness leaves: the count line, ``cases.tsv`` (one line per case)
and ``report.md`` (the counts by category, every bad case with its command and the last
lines of its stderr, and the cases that could not be made here)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.faults.cases import KINDS
from tests.faults.harness import Outcome
from tests.faults.outcomes import (BAD, CORRECT, HANG, LOST, ONE_LINE, ORDER, SKIPPED,
                                   TRACEBACK, VAGUE)


def summary(outcomes: list[Outcome]) -> str:
    """The count line: cases tried / one-line or correct / lost or silently wrong / hangs /
    tracebacks (and the one-line errors that do not name the path, and the skipped)."""
    counts = Counter(o.verdict for o in outcomes)
    tried = len(outcomes) - counts[SKIPPED]
    return (f"{tried} cases tried: {counts[ONE_LINE] + counts[CORRECT]} one-line or correct, "
            f"{counts[LOST]} lost or silently wrong, {counts[HANG]} hangs, "
            f"{counts[TRACEBACK]} tracebacks, {counts[VAGUE]} one-line errors naming no path"
            f" ({counts[SKIPPED]} skipped)")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("\t", " ")


def tsv(outcomes: list[Outcome]) -> str:
    """One line per case: outcome, seconds, kind, target, command, fault, known fault,
    detail, command line."""
    lines = ["outcome\tseconds\tkind\ttarget\tcommand\tfault\tknown\tdetail\tcommand line"]
    for o in outcomes:
        c = o.case
        lines.append("\t".join(_cell(v) for v in (
            o.verdict, f"{o.seconds:.1f}", c.kind, c.target, c.command + (
                f" ({c.variant})" if c.variant else ""), c.fault, c.known, o.detail,
            o.command)))
    return "\n".join(lines) + "\n"


def table(outcomes: list[Outcome]) -> list[str]:
    """The outcomes by category, as a Markdown table."""
    shown = [k for k in ORDER if any(o.verdict == k for o in outcomes)]
    lines = ["| category | cases | " + " | ".join(shown) + " |",
             "| --- | --- |" + " --- |" * len(shown)]
    for kind in KINDS:
        counts = Counter(o.verdict for o in outcomes if o.case.kind == kind)
        if counts:
            lines.append(f"| {kind} | {sum(counts.values())} | "
                         + " | ".join(str(counts[k]) for k in shown) + " |")
    return lines


def known_faults(outcomes: list[Outcome]) -> list[str]:
    """Each known fault (a case's ``known``) with the outcomes of the cases that show it:
    all good once it is fixed."""
    by_fault: dict[str, Counter] = {}
    for o in outcomes:
        if o.case.known:
            by_fault.setdefault(o.case.known, Counter())[o.verdict] += 1
    lines = ["| known fault | cases | outcomes |", "| --- | --- | --- |"]
    for fault, counts in by_fault.items():
        shown = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        lines.append(f"| {fault} | {sum(counts.values())} | {shown} |")
    return lines if by_fault else []


def bad_cases(outcomes: list[Outcome]) -> list[str]:
    """Every bad case: what was done, the command, what happened, its last stderr lines."""
    lines = []
    for o in outcomes:
        if o.verdict not in BAD:
            continue
        c = o.case
        lines += [f"### {o.verdict}: {c.name}", "",
                  f"- fault: {c.fault}" + (f" (known: {c.known})" if c.known else ""),
                  f"- command: `{o.command}`", f"- what happened: {o.detail}"]
        if o.stderr:
            lines += ["- last lines of stderr:", "", "```text", *o.stderr, "```"]
        lines.append("")
    return lines


def markdown(outcomes: list[Outcome], seconds: float, command: str,
             unread: list[str] = ()) -> str:
    """The report: the count line, the table by category, the known faults' cases, every
    bad case, the skipped ones and (``unread``) the kinds of file written that no read case
    damages."""
    skipped = [o for o in outcomes if o.verdict == SKIPPED]
    lines = ["# Fault harness report", "", f"`{command}`, {seconds / 60:.0f} minutes", "",
             summary(outcomes), "", *table(outcomes), ""]
    if known := known_faults(outcomes):
        lines += ["## Known faults", "", *known, ""]
    lines += ["## Bad outcomes", "", *bad_cases(outcomes)]
    if skipped:
        lines += ["## Skipped", ""] + [f"- {o.case.name}: {o.detail}" for o in skipped] + [""]
    if unread:
        lines += ["## Written, and damaged by no read case", "",
                  "Files the commands wrote into the workspace that no case damages before "
                  "a read (most are read back by no command: plots, TensorBoard's projector "
                  "files, the evaluators' outputs):", ""] + [f"- `{name}`" for name in unread]
    return "\n".join(lines) + "\n"


def write(directory: Path, outcomes: list[Outcome], seconds: float, command: str,
          unread: list[str] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cases.tsv").write_text(tsv(outcomes), encoding="utf-8")
    (directory / "report.md").write_text(markdown(outcomes, seconds, command, unread),
                                         encoding="utf-8")
