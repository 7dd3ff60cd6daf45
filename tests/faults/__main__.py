"""``python -m tests.faults``: run the fault cases (see :mod:`tests.faults`) and print one line
per case, then the count line; ``--report DIR`` writes ``cases.tsv`` and ``report.md``."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tests.faults import report  # noqa: E402
from tests.faults.cases import KINDS, select  # noqa: E402
from tests.faults.harness import Outcome, run_cases  # noqa: E402
from tests.faults.inventory import unread  # noqa: E402
from tests.faults.outcomes import BAD  # noqa: E402
from tests.faults.workspace import Workspace  # noqa: E402


def kinds(text: str) -> set[str]:
    chosen = {k.strip() for k in text.split(",") if k.strip()}
    unknown = sorted(chosen - set(KINDS))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown categories {unknown}; choose from "
                                         f"{', '.join(KINDS)}")
    return chosen


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.faults", allow_abbrev=False,
                                description=__doc__.split(": ", 1)[1])
    p.add_argument("--kinds", type=kinds, default=None,
                   help=f"comma list of categories (default: all): {', '.join(KINDS)}")
    p.add_argument("--quick", action="store_true",
                   help="only a subset: one or two cases of each category and the known faults")
    p.add_argument("--match", action="append", default=None, metavar="TEXT",
                   help="only the cases whose name contains TEXT (repeatable)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds a command may run before it counts as a hang (default: 300)")
    p.add_argument("--report", type=Path, default=None, metavar="DIR",
                   help="write cases.tsv and report.md into DIR")
    p.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                   help="build the workspace and the cases' folders in DIR (a new folder, "
                        "kept); default: a temporary folder, removed at the end")
    p.add_argument("--list", action="store_true", help="list the chosen cases and exit")
    return p


def progress(o: Outcome) -> None:
    print(f"{o.verdict:>22} {o.seconds:6.1f}s {o.case.name}: {o.detail[:160]}", flush=True)


def main(argv: list[str] | None = None) -> list[Outcome]:
    args = build_parser().parse_args(argv)
    cases = select(args.kinds, args.quick, args.match)
    if args.list:
        print("\n".join(case.name for case in cases))
        return []
    root = args.workspace or Path(tempfile.mkdtemp(prefix="tcnlm-faults-"))
    start = time.perf_counter()
    try:
        ws = Workspace(root)
        outcomes = run_cases(cases, ws, args.timeout, progress)
        seconds = time.perf_counter() - start
        print(report.summary(outcomes) + f" in {seconds / 60:.0f} minutes")
        if args.report:
            report.write(args.report, outcomes, seconds,
                         " ".join(["python -m tests.faults", *(argv or sys.argv[1:])]),
                         unread(ws))
    finally:
        if args.workspace is None:
            shutil.rmtree(root, ignore_errors=True)
    return outcomes


if __name__ == "__main__":
    sys.exit(1 if any(o.verdict in BAD for o in main()) else 0)
