"""``python -m evaluate.compare --dataset apnews``: train TCNLM and its baselines on one
corpus with the same preset, budget and seed, and write their test perplexities as one table
(the comparison of Wang et al. 2018, Tables 2 and 6).

The rows, by default all of them, come from the model registry
(:mod:`tcnlm_tf.models.registry`, each model's ``compare_rows``): ``lstm`` (the sentence-level
LSTM, each sentence on its own as the topic models see it), ``lstm-document`` (its state
carried across the sentences of a document), then one row per topic-guided model (``tcnlm``,
``moe``: Table 6's 30 experts of 100 units, ``tdlm``, ...). Every row whose model takes
``--num-topics`` gets the comparison's ``--num-topics`` unless its row pins its own.

Each row is one ``python -m train.run`` run in ``<runs-dir>/<name>/<row>/``. A run that already
has its test perplexity is reused, one that stopped early is resumed from its checkpoint: an
interrupted comparison continues where it stopped when the same command is run again. For the
topic models the command also writes their top words (``topics.txt``) and NPMI coherence
(``coherence.json``, reference: the training split, window 20). The table goes to
``<runs-dir>/<name>/comparison.md`` and ``comparison.json``.

Arguments after ``--`` go to every ``train.run`` call (e.g. ``-- --epochs 3``), a model's
own options only to the rows of models that take them. ``--jobs 2``
trains two rows at a time, each writing its output to ``<runs-dir>/<name>/<row>.log``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from tcnlm_tf.config import DATASETS, PRESETS, default_cache_dir, default_data_dir
from tcnlm_tf.corpus import write_text
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.models.registry import MODELS, all_options, compare_rows

#: row name -> (model, the train.run flags that make it besides the shared ones)
ROWS = compare_rows()
SETTINGS_FILE = "compare.json"
POLL_SECONDS = 2.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False,
        prog="python -m evaluate.compare", description=__doc__.split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python -m evaluate.compare --dataset apnews --data-dir ../shared/data")
    p.add_argument("--dataset", choices=DATASETS, default="synthetic",
                   help="corpus to compare on (default: synthetic)")
    p.add_argument("--data-dir", type=Path, default=default_data_dir(),
                   help="directory holding <dataset>/{train,valid,test}.txt")
    p.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                   help="prepared-corpus cache (shared with train.run)")
    p.add_argument("--models", default=",".join(ROWS),
                   help=f"comma-separated rows, from {', '.join(ROWS)} (default: all)")
    p.add_argument("--preset", choices=tuple(PRESETS), default="small",
                   help="size preset of the LSTM-based rows (default: small)")
    p.add_argument("--num-topics", type=int, default=50,
                   help="topics T of the topic-model rows (default: 50; the moe row keeps "
                   "Table 6's 30 experts)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (default: 0)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"),
                   help="where the comparison directory is made (default: runs)")
    p.add_argument("--name", help="comparison directory name (default: compare-<dataset>)")
    p.add_argument("--jobs", type=int, default=1,
                   help="rows trained at the same time, each logging to <name>/<row>.log "
                   "(default: 1). On a 2-core machine, 2 jobs train about 1.6x as many tokens "
                   "per second in total as 1")
    p.add_argument("train_args", nargs="*", metavar="-- TRAIN_FLAGS",
                   help="extra train.run flags for every row, after --")
    return p


def parse_rows(text: str) -> list[str]:
    rows = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        raise UserError(f"--models {text!r}: unknown or empty; choose from {', '.join(ROWS)}")
    return rows


def check_settings(directory: Path, settings: dict) -> None:
    """Refuses to mix runs made with different settings in one comparison directory."""
    path = directory / SETTINGS_FILE
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved != settings:
            changed = sorted(k for k in settings.keys() | saved.keys()
                             if saved.get(k) != settings.get(k))
            raise UserError(f"{directory} holds a comparison made with other settings "
                            f"({', '.join(changed)} differ); use --name for a new one")
    directory.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(settings, indent=2) + "\n")


def budget_flags(train_args: list[str]) -> list[str]:
    """The flags of ``train_args`` that a resumed run accepts (its training budget)."""
    from train.run import RESUMABLE, build_parser, explicit_settings

    explicit = explicit_settings(build_parser().parse_args(train_args))
    flags = []
    for name in sorted(RESUMABLE & explicit.keys()):
        flags += [f"--{name.replace('_', '-')}", str(explicit[name])]
    return flags


def finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run that reached its test evaluation."""
    path = run_dir / "metrics.json"
    return path.is_file() and "test_perplexity" in json.loads(path.read_text())


def row_train_args(model: str, train_args: list[str]) -> list[str]:
    """``train_args`` without the model options that ``model`` does not take (each such
    flag with its value): a model's own flags after ``--`` go to the rows of that model."""
    others = {option.option_string for name, option in all_options().items()
              if name not in MODELS[model].option_names}
    kept, skip = [], False
    for arg in train_args:
        if skip:
            skip = False
        elif arg.split("=", 1)[0] in others:
            skip = "=" not in arg
        else:
            kept.append(arg)
    return kept


def row_command(row: str, directory: Path, shared: list[str], train_args: list[str],
                cache_dir: Path) -> list[str]:
    """The ``train.run`` command that trains the row, or resumes it from its checkpoint."""
    model, flags = ROWS[row]
    train_args = row_train_args(model, train_args)
    run_dir = directory / row
    command = [sys.executable, "-m", "train.run", "--runs-dir", str(directory),
               "--run-name", row, "--cache-dir", str(cache_dir)]
    if (run_dir / "checkpoints" / "checkpoint").is_file():
        print(f"== {row}: resuming {run_dir} from its latest checkpoint", flush=True)
        return command + ["--resume"] + budget_flags(train_args)
    print(f"== {row}: training in {run_dir}", flush=True)
    return command + shared + flags + train_args


def run_commands(commands: dict[str, list[str]], directory: Path, jobs: int) -> list[str]:
    """Runs the rows' commands, ``jobs`` at a time; returns the rows whose command failed.

    With one job the output goes to the terminal; with more, each row's output goes to
    ``<directory>/<row>.log`` (named when the row starts)."""
    if jobs == 1:
        return [row for row, command in commands.items() if subprocess.run(command).returncode]
    pending, running, failed = list(commands), {}, []
    while pending or running:
        while pending and len(running) < jobs:
            row = pending.pop(0)
            log = open(directory / f"{row}.log", "a", encoding="utf-8")
            print(f"== {row}: output in {log.name}", flush=True)
            running[row] = (subprocess.Popen(commands[row], stdout=log,
                                             stderr=subprocess.STDOUT), log)
        time.sleep(POLL_SECONDS)
        for row, (process, log) in list(running.items()):
            if process.poll() is not None:
                log.close()
                del running[row]
                print(f"== {row}: finished (exit {process.returncode})", flush=True)
                if process.returncode:
                    failed.append(row)
    return failed


def topic_evaluations(run_dir: Path) -> dict:
    """Top-10 words (``topics.txt``) and NPMI coherence (``coherence.json``) of a topic run."""
    from evaluate import coherence, topics

    topics.main(["--run", str(run_dir), "--top-n", "10"])
    return coherence.main(["--run", str(run_dir)])


def table(rows: dict[str, dict]) -> str:
    """The comparison as a Markdown table; ratios are to the sentence-level LSTM's perplexity."""
    reference = rows.get("lstm", {}).get("test_perplexity")
    lines = ["| model | size | parameters | epochs | best valid ppl | test ppl | "
             "test ppl / sentence LSTM | NPMI (mean of top 5/10/15/20) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row, m in rows.items():
        ratio = f"{m['test_perplexity'] / reference:.3f}" if reference else "-"
        npmi = f"{m['coherence']['mean']:.4f}" if "coherence" in m else "-"
        lines.append(f"| {row} | {m['size']} | {m['parameters']:,} | {len(m['epochs'])} | "
                     f"{m['best_valid_perplexity']:.2f} | {m['test_perplexity']:.2f} | "
                     f"{ratio} | {npmi} |")
    baselines = next(iter(rows.values()))["baselines"]
    names = {"unigram": "unigram (add-one, train split)", "oracle": "oracle (true generator)"}
    for key, label in names.items():
        value = baselines.get(key)
        if value is not None:
            ratio = f"{value / reference:.3f}" if reference else "-"
            lines.append(f"| {label} | - | - | - | - | {value:.2f} | {ratio} | - |")
    return "\n".join(lines) + "\n"


def size_of(run_dir: Path) -> str:
    """``layers x hidden`` (and ``T`` for the topic models) from the run's config.json."""
    model = json.loads((run_dir / "config.json").read_text())["model"]
    size = f"{model['num_layers']}x{model['hidden_size']}"
    if "num_topics" in model.get("options", {}):
        size += f", T={model['options']['num_topics']}"
    return size


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, dict]:
    args = build_parser().parse_args(argv)
    rows = parse_rows(args.models)
    if args.jobs < 1:
        raise UserError("--jobs must be >= 1")
    budget_flags(args.train_args)  # unknown train.run flags fail here, before any training
    if any(a == "--max-steps" or a.startswith("--max-steps=") for a in args.train_args):
        raise UserError("--max-steps would stop the runs before their test evaluation; bound "
                        "a comparison with --epochs instead")
    directory = args.runs_dir / (args.name or f"compare-{args.dataset}")
    shared = ["--dataset", args.dataset, "--data-dir", str(args.data_dir),
              "--preset", args.preset, "--seed", str(args.seed)]
    check_settings(directory, {"dataset": args.dataset,
                               "data_dir": str(args.data_dir.resolve()),
                               "preset": args.preset, "num_topics": args.num_topics,
                               "seed": args.seed, "train_args": args.train_args})
    commands = {}
    for row in rows:
        if finished(directory / row):
            print(f"== {row}: reusing {directory / row} (already evaluated)", flush=True)
            continue
        model, flags = ROWS[row]
        extra = (["--num-topics", str(args.num_topics)]
                 if "num_topics" in MODELS[model].option_names and "--num-topics" not in flags
                 else [])
        commands[row] = row_command(row, directory, shared + extra, args.train_args,
                                    args.cache_dir)
    failed = run_commands(commands, directory, args.jobs)
    if failed:
        raise UserError(f"training failed for {', '.join(failed)} (messages above or in "
                        f"{directory}/<row>.log); fix the cause and run the same command "
                        "again: finished rows are kept, the others resume")
    results = {}
    for row in (r for r in ROWS if r in rows):
        run_dir = directory / row
        metrics = json.loads((run_dir / "metrics.json").read_text())
        metrics["size"] = size_of(run_dir)
        if MODELS[ROWS[row][0]].has_topics:
            metrics["coherence"] = topic_evaluations(run_dir)
        results[row] = metrics
    text = (f"Test perplexity on {args.dataset} ({args.preset} preset, seed {args.seed}"
            + (f", train.run flags {' '.join(args.train_args)}" if args.train_args else "")
            + ")\n\n" + table(results))
    write_text(directory / "comparison.md", text)
    write_text(directory / "comparison.json",
               json.dumps(results, indent=2, default=float) + "\n")
    print("\n" + text)
    print(f"written to {directory / 'comparison.md'} and comparison.json; topics and coherence "
          f"in each topic model's run directory")
    return results


if __name__ == "__main__":
    main()
