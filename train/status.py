"""``python -m train.status``: what became of the runs under a runs directory, for the
moment work resumes after a stop (a pre-empted job, a lost machine, a new day): which runs
are training now, which finished and which are waiting to be resumed, with each one's
epochs, best validation perplexity, learning rate, time spent training and newest
checkpoint.

Every run directory (one with a ``config.json``) directly under ``--runs-dir`` or one level
down (a comparison's runs, ``<runs-dir>/<comparison>/<run>``) is listed. A run is
*running* while a process holds its lock (:mod:`tcnlm_tf.runs.lock`), *finished* once its
``metrics.json`` has a test perplexity, and otherwise *to resume* from its newest checkpoint
(or *not started* without one); a run whose ``metrics.json`` cannot be read says so in its
state, with the file and what is wrong with it below the table. Reads files only: it starts
no TensorFlow, and it probes a run's lock for an instant without keeping it.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import time
from pathlib import Path

from tcnlm_tf.config import RunConfig, default_runs_dir
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.runs.directory import RunDirectory, read_json_object
from tcnlm_tf.runs.lock import holder, is_held

#: metrics.json's ``stopped`` -> how the table says it
STOPPED = {"early_stopping": "patience", "epochs": "epoch cap", "max_steps": "--max-steps"}
COLUMNS = ("run", "model", "state", "epochs", "best valid (epoch)", "lr", "train time",
           "newest checkpoint", "test ppl")


def run_directories(root: Path) -> list[Path]:
    """The run directories directly under ``root`` or one level down, sorted by path."""
    found = [path.parent for pattern in ("*/config.json", "*/*/config.json")
             for path in root.glob(pattern)]
    return sorted(found)


def newest_checkpoint(run: RunDirectory) -> tuple[int, float] | None:
    """(step, modification time) of the newest training checkpoint, or None (none yet, or
    no ``checkpoints/checkpoint`` file, without which ``--resume`` has nothing to go on
    from). A file that a running training deletes meanwhile is passed over."""
    if not run.has_checkpoint():
        return None
    steps = []
    for path in run.checkpoints.glob("ckpt-*.index"):
        match = re.fullmatch(r"ckpt-(\d+)\.index", path.name)
        try:
            if match:
                steps.append((int(match.group(1)), path.stat().st_mtime))
        except OSError:
            continue
    return max(steps) if steps else None


def age(seconds: float) -> str:
    """``seconds`` as the coarsest unit that keeps it readable: 45 s, 12 min, 5.3 h, 2.1 days."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def train_time(history: list[dict]) -> str:
    """The finished epochs' training loops (``metrics.json``'s per-epoch ``seconds``, across
    resumes; validation and time lost to a stop not counted) in all and per epoch: ``5.3 h
    (21 min/epoch)``, or ``-`` before the first epoch ends."""
    seconds = [e["seconds"] for e in history if isinstance(e.get("seconds"), (int, float))]
    if not seconds:
        return "-"
    return f"{age(sum(seconds))} ({age(sum(seconds) / len(seconds))}/epoch)"


def summary(path: Path, root: Path, now: float) -> dict:
    """One run's row: its name relative to ``root`` and the :data:`COLUMNS` values, plus
    ``state_kind`` (running, finished, to resume or not started)."""
    run = RunDirectory(path)
    try:
        config = RunConfig.load(run.config)
    except (OSError, ValueError, TypeError, KeyError, UserError) as err:
        return {"run": str(path.relative_to(root)), "state_kind": "unreadable",
                "state": "unreadable config.json", "error": str(err)}
    metrics, unreadable = {}, None
    if run.metrics.is_file():
        try:
            metrics = read_json_object(run.metrics, "restore it from a copy; the checkpoints "
                                                    "are intact")
        except UserError as err:
            unreadable = str(err)
    history = metrics.get("epochs") or []
    valid = [(e["valid_perplexity"], e["epoch"]) for e in history
             if math.isfinite(e.get("valid_perplexity", math.nan))]
    checkpoint = newest_checkpoint(run)
    if is_held(path):
        kind, state = "running", f"running ({holder(path)})"
    elif "test_perplexity" in metrics:
        stopped = metrics.get("stopped")
        kind, state = "finished", f"finished ({STOPPED.get(stopped, stopped)})"
    elif checkpoint is not None:
        kind, state = "to resume", "to resume"
    else:
        kind, state = "not started", "not started"
    test = metrics.get("test_perplexity")
    return {
        "run": str(path.relative_to(root)), "state_kind": kind,
        "state": state + (" (metrics.json unreadable)" if unreadable else ""),
        **({"error": unreadable} if unreadable else {}),
        "model": config.model.model + ("" if config.model.mode == "sentence"
                                       else f" ({config.model.mode})"),
        "epochs": f"{len(history)}/{config.train.epochs}",
        "best valid (epoch)": f"{min(valid)[0]:.2f} ({min(valid)[1]})" if valid else "-",
        "lr": f"{history[-1]['learning_rate']:.3g}" if history else "-",
        "train time": train_time(history),
        "newest checkpoint": (f"step {checkpoint[0]}, {age(now - checkpoint[1])} ago"
                              if checkpoint else "-"),
        "test ppl": f"{test:.2f}" if isinstance(test, (int, float)) else "-",
    }


def render(rows: list[dict]) -> str:
    """The rows as a plain table with aligned columns."""
    cells = [list(COLUMNS)] + [[row.get(column, "-") for column in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in cells)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m train.status", allow_abbrev=False,
                                description=__doc__.split(": ", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs-dir", type=Path, default=default_runs_dir(),
                   help="where the runs are (default: $TCNLM_RUNS_DIR, else ./runs)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    return p


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[dict]:
    args = build_parser().parse_args(argv)
    root = args.runs_dir
    if not root.is_dir():
        raise UserError(f"--runs-dir {root} is not a directory; give the directory train.run "
                        "and evaluate.compare wrote to (--runs-dir or $TCNLM_RUNS_DIR)")
    now = time.time()
    rows = [summary(path, root, now) for path in run_directories(root)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return rows
    if not rows:
        print(f"no run directories (with a config.json) under {root} or one level down")
        return rows
    counts = {kind: sum(row["state_kind"] == kind for row in rows)
              for kind in ("running", "finished", "to resume", "not started", "unreadable")}
    print(f"{len(rows)} runs under {root}: "
          + ", ".join(f"{n} {kind}" for kind, n in counts.items() if n))
    print(render(rows))
    for row in rows:
        if "error" in row:
            print(f"{row['run']}: {row['error']}")
    if counts["to resume"]:
        print("to go on with a run to resume: its train.run command again with --resume "
              "(a comparison's runs: the comparison's command again)")
    return rows


if __name__ == "__main__":
    main()
