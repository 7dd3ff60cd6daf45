"""``python -m evaluate.record --run DIR --record-dir DIR [--commit-records]``: a finished
run's record in a tracked folder, as ``evaluate.compare --record-dir`` keeps its rows'.

A training that takes days lives in a runs directory outside the checkout (``--runs-dir``,
``$TCNLM_RUNS_DIR``) and is resumed after every stop; once ``train.run`` has evaluated its test
split, this writes ``DIR/<run>/``: ``metrics.json`` (the run's metrics, per-epoch history and
test perplexity, with its size and, for a topic model, the NPMI of its topics), its
``config.json`` and, where the run has them, its topics and coherence. With
``--commit-records`` it commits exactly those files (``git commit --only``: nothing else that
is staged), so a machine lost afterwards loses nothing. Recording the same run again writes
the same files.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evaluate.common import read_record
from evaluate.compare import (commit_files, evaluated, finished, git_toplevel, record_message,
                              write_record)
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.models.registry import MODELS
from tcnlm_tf.runs.directory import RunDirectory


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m evaluate.record", description=__doc__.split(": ", 1)[1],
        epilog="example: python -m evaluate.record --run runs/pd-tied-medium "
               "--record-dir results/peoples-daily/tied-medium --commit-records",
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--run", type=Path, required=True,
                   help="the run directory (train.run's --runs-dir/--run-name)")
    p.add_argument("--record-dir", type=Path, required=True,
                   help="the tracked folder the record goes to, as DIR/<run>/")
    p.add_argument("--commit-records", action="store_true",
                   help="commit the record's files, as evaluate.compare's flag of that name "
                        "(--record-dir must be in a git work tree)")
    return p


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[Path]:
    args = build_parser().parse_args(argv)
    config = RunDirectory(args.run).config
    if not config.is_file():
        raise UserError(f"--run {args.run}: no {config.name} there; give the directory of a "
                        "train.run run")
    model = read_record(config, "--run").get("model", {}).get("model")
    if model not in MODELS:
        raise UserError(f"--run {args.run}: its {config.name} names no model this version "
                        f"knows ({model!r}); give the directory of a train.run run")
    metrics = finished(args.run)
    if metrics is None:
        raise UserError(f"--run {args.run}: not finished (its metrics have no test perplexity "
                        "yet); record it once train.run has evaluated its test split")
    # where the record goes, checked before the run's topics are evaluated (which writes
    # into the run): a folder that cannot be made, or is in no git work tree, stops here
    (args.record_dir / args.run.name).mkdir(parents=True, exist_ok=True)
    if args.commit_records:
        git_toplevel(args.record_dir)
    metrics = evaluated(args.run, metrics, model, ablations=False)
    written = write_record(args.record_dir, args.run, metrics)
    print(f"recorded {args.run} in {args.record_dir / args.run.name}: test perplexity "
          f"{metrics['test_perplexity']:.2f} after {len(metrics['epochs'])} epochs "
          f"({metrics.get('stopped')})")
    if args.commit_records:
        commit_files(written, record_message(args.record_dir, args.run.name, metrics))
    return written


if __name__ == "__main__":
    main()
