"""``python -m benchmarks.bench_input_speed``: training speed on a real corpus, this checkout's
code against a baseline commit's, in alternating rounds.

Where :mod:`benchmarks.bench_corpus_size` asks how the input path scales on generated text,
this asks whether it costs training speed on a corpus users train on (APNEWS by default,
from ``../shared/data``): the same ``python -m train.run`` command, with the dataset's own
settings (its preset, vocabulary rules and batch), run by both codes.

1. Preparation. Each code prepares the corpus once, in a fresh child process, into a
   cache directory of its own under ``--work-dir`` (as ``bench_corpus_size`` measures it:
   ``load_corpus``'s wall time, the child's peak RSS, the cache's bytes).
2. Rounds. ``--rounds`` rounds each train every model of ``--models`` once with each code,
   for ``--steps`` optimiser steps in a fresh child process and run directory; the code
   that goes first alternates from round to round and from model to model (so neither
   code is always timed first on a machine whose load drifts). tokens/s is the trainer's
   own ``train/tokens_per_sec`` over steps 2..N (start-up excluded), the child's peak RSS
   as in ``bench_corpus_size``.
3. Summary. Per model and code the median tokens/s over the rounds; per model the ratio
   current/baseline of the medians and the range of the per-round ratios (each round's two
   trainings ran one after the other). Every figure is computed in the run;
   ``--output FILE`` writes them all as JSON.

    python -m benchmarks.bench_input_speed --work-dir speed-work --baseline HEAD~1
    python -m benchmarks.bench_input_speed --work-dir speed-work --baseline v1 \\
        --dataset imdb --models lstm --rounds 5 --steps 300
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

# Allow `python benchmarks/bench_input_speed.py` as well as `python -m ...` from the root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_corpus_size import (  # noqa: E402
    MB, baseline_root, code_line, describe_code, fmt, machine_description,
    measure_preparation, measure_training, model_names, progress, split_train_flags,
    write_report)
from benchmarks.harness import Parser, name_list, print_table  # noqa: E402
from tcnlm_tf.arguments import integer  # noqa: E402
from tcnlm_tf.errors import UserError, exit_on_user_error  # noqa: E402

PROGRAM = "python -m benchmarks.bench_input_speed"
REPO_ROOT = Path(__file__).resolve().parent.parent
#: the shared corpora beside the checkout (``--data-dir``'s default)
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROGRAM, allow_abbrev=False,
               formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Training speed on a real corpus: this checkout's code against a "
                           "baseline commit's, the same train.run command, in alternating "
                           "rounds of fresh processes; tokens/s medians and their ratio.",
               epilog="One row per round, model and code: tokens/s (steps 2..--steps) and "
                      "the training's peak RSS; then per model the medians and the ratio "
                      "current/baseline with the range of the per-round ratios.\n"
                      "The module docstring (benchmarks/bench_input_speed.py) says how each "
                      "figure is measured.\n\nexamples:\n"
                      f"  {PROGRAM} --work-dir speed-work --baseline HEAD~1\n"
                      f"  {PROGRAM} --work-dir speed-work --baseline v1 --dataset imdb "
                      "--models lstm --rounds 5 --steps 300")
    p.add_argument("--work-dir", required=True, type=Path, metavar="DIR",
                   help="where the caches, runs, logs and the baseline's worktree go")
    p.add_argument("--baseline", required=True, metavar="REF",
                   help="the commit (a git ref of --repository) whose code is measured "
                        "beside this checkout's, from a worktree under --work-dir")
    p.add_argument("--repository", type=Path, default=REPO_ROOT, metavar="DIR",
                   help="the git repository REF is taken from (default: this checkout)")
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA, metavar="DIR",
                   help="the folder holding the corpus folder (default: ../shared/data "
                        "beside the checkout)")
    p.add_argument("--dataset", default="apnews",
                   help="the corpus folder under --data-dir, as train.run's --dataset: a "
                        "named dataset trains with its own settings (default: apnews)")
    p.add_argument("--models", type=name_list(model_names(), "--models"),
                   default=["lstm", "tcnlm"],
                   help=f"models trained, out of {','.join(model_names())} "
                        "(default: lstm,tcnlm)")
    p.add_argument("--steps", type=integer(2), default=300,
                   help="optimiser steps of each training, at least 2: tokens/s is "
                        "measured over the steps after the first (default: 300)")
    p.add_argument("--rounds", type=integer(1), default=3,
                   help="trainings of each model with each code (default: 3)")
    p.add_argument("--train-flags", default="", metavar='"FLAGS"',
                   help="further train.run flags for every training, e.g. \"--precision "
                        "mixed_bfloat16\"; not the ones the benchmark sets (--dataset, "
                        "--data-dir, --cache-dir, --runs-dir, --run-name, --model, "
                        "--max-steps, --log-every, --resume, --config, --synthetic)")
    p.add_argument("--timeout", type=integer(0), default=0, metavar="SECONDS",
                   help="a time limit for each preparation and training (default: 0, none)")
    p.add_argument("--output", type=Path, default=None, metavar="FILE",
                   help="also write every figure as JSON to FILE")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags, checked: a bad value (or a missing corpus) is a :class:`UserError`."""
    args = build_parser().parse_args(argv)
    args.train_flags = split_train_flags(args.train_flags)
    train = args.data_dir / args.dataset / "train.txt"
    if not train.is_file():
        raise UserError(f"no corpus at {train}: give --data-dir (the folder holding the "
                        f"corpus folder) and --dataset (its name)")
    return args


def order_of(round_index: int, model_index: int, codes: list[str]) -> list[str]:
    """The order in which the codes train a model in a round: alternating by round and by
    model."""
    return codes if (round_index + model_index) % 2 == 0 else codes[::-1]


def summary(rows: list[dict[str, Any]], models: list[str]) -> dict[str, Any]:
    """Per model: each code's median tokens/s and the ratio current/baseline of the medians,
    with the lowest and highest per-round ratio."""
    result = {}
    for model in models:
        rates = {code: [r["tokens_per_sec"] for r in rows
                        if r["model"] == model and r["code"] == code and r["tokens_per_sec"]]
                 for code in ("current", "baseline")}
        entry: dict[str, Any] = {f"median_{code}": statistics.median(v) if v else None
                                 for code, v in rates.items()}
        per_round = [cur["tokens_per_sec"] / base["tokens_per_sec"]
                     for cur in rows for base in rows
                     if cur["model"] == base["model"] == model and cur["round"] == base["round"]
                     and cur["code"] == "current" and base["code"] == "baseline"
                     and cur["tokens_per_sec"] and base["tokens_per_sec"]]
        if entry["median_current"] and entry["median_baseline"]:
            entry["ratio"] = entry["median_current"] / entry["median_baseline"]
        entry["round_ratios"] = per_round
        result[model] = entry
    return result


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.work_dir = args.work_dir.expanduser().resolve()
    base_root, commit = baseline_root(args.repository.resolve(), args.baseline, args.work_dir)
    roots = {"current": REPO_ROOT, "baseline": base_root}
    codes = {"current": describe_code(REPO_ROOT),
             "baseline": {"root": str(base_root), "ref": args.baseline, "commit": commit,
                          "changed": False}}
    machine = machine_description()
    command = f"{PROGRAM} {shlex.join(argv)}".rstrip()
    data = ["--dataset", args.dataset, "--data-dir", str(args.data_dir.resolve())]
    common = ["--max-steps", str(args.steps), "--log-every", "1", *args.train_flags]
    place = args.work_dir / "input-speed" / args.dataset

    def flags(code: str) -> list[str]:
        return [*data, "--cache-dir", str(place / code / "cache"), *common]

    preparations, rows = {}, []
    for code, root in roots.items():
        progress(f"[{code}] preparing {args.dataset} ...")
        prep = measure_preparation(root, [*flags(code), "--model", args.models[0]],
                                   place / code / "cache", place / code / "logs" /
                                   "prepare.log", args.timeout)
        if prep["prep_status"] != "ok":
            raise UserError(f"the {code} code's preparation of {args.dataset} failed: "
                            f"{prep['prep_status']} (log {prep['prep_log']})")
        progress(f"[{code}] preparation: {fmt(prep['prep_s'], 1)} s, peak RSS "
                 f"{prep['prep_peak_rss_mb']:.0f} MB")
        preparations[code] = prep

    def report(complete: bool) -> dict[str, Any]:
        result = {"machine": machine, "command": command, "complete": complete,
                  "codes": codes, "preparations": preparations, "rows": rows,
                  "summary": summary(rows, args.models)}
        write_report(args.output, result)
        return result

    for round_index in range(args.rounds):
        for model_index, model in enumerate(args.models):
            for code in order_of(round_index, model_index, list(roots)):
                label = f"[round {round_index + 1}/{args.rounds} {code}]"
                progress(f"{label} training {model} for {args.steps} steps ...")
                measured = measure_training(
                    roots[code], flags(code), place / code / "runs", model,
                    place / code / "logs" / f"train-{model}-{round_index + 1}.log",
                    args.steps, args.timeout)
                if measured["train_status"] != "ok":
                    raise UserError(f"{label} {model}: {measured['train_status']} (log "
                                    f"{measured['train_log']})")
                rows.append({"round": round_index + 1, "model": model, "code": code,
                             **measured})
                progress(f"{label} {model}: {fmt(measured['tokens_per_sec'], 0)} tokens/s")
                report(complete=False)
    final = report(complete=True)
    print(machine)
    print(f"command: {command}")
    for code, info in codes.items():
        print(code_line(code, info))
    for code, prep in preparations.items():
        print(f"{code} preparation of {args.dataset}: {prep['prepared_tokens']:,} training "
              f"tokens in {prep['prep_s']:.1f} s, peak RSS {prep['prep_peak_rss_mb']:.0f} MB, "
              f"cache {prep['cache_bytes'] / MB:.1f} MB")
    print(f"training: {args.steps} steps of train.run {shlex.join([*data[:2], *common])}")
    print()
    print_table(("round", "model", "code", "tokens/s", "train peak RSS MB", "start-up s"),
                [(str(r["round"]), r["model"], r["code"], fmt(r["tokens_per_sec"], 0),
                  fmt(r["train_peak_rss_mb"], 0), fmt(r["startup_s"], 1)) for r in rows],
                left=3)
    for r in rows:
        for note in r["train_notes"]:
            print(f"note: round {r['round']} {r['code']} {r['model']}: {note}")
    print()
    for model, entry in final["summary"].items():
        ratios = entry["round_ratios"]
        print(f"{model}: median tokens/s current {fmt(entry['median_current'], 0)}, baseline "
              f"{fmt(entry['median_baseline'], 0)}; current / baseline "
              f"{entry.get('ratio', float('nan')):.3f}"
              + (f" (per round {min(ratios):.3f} to {max(ratios):.3f})" if ratios else ""))
    if args.output is not None:
        print(f"\nwritten: {args.output}")
    return final


if __name__ == "__main__":
    main()
