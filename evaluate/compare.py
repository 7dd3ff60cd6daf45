"""``python -m evaluate.compare --dataset apnews``: train TCNLM and its baselines on one
corpus with the same preset, stopping rule and seed, and write their test perplexities as one
table (the comparison of Wang et al. 2018, Tables 2, 4 and 6).

The rows, by default all of them, come from the model registry
(:mod:`tcnlm_tf.models.registry`, each model's ``compare_rows``): ``lstm`` (the sentence-level
LSTM, each sentence on its own as the topic models see it), ``lstm-document`` (its state
carried across the sentences of a document), then one row per topic-guided model (``tcnlm``,
``moe``: Table 6's 30 experts of 100 units, ``tdlm``, ...). Every row whose model takes
``--num-topics`` gets the comparison's ``--num-topics`` unless its row pins its own.

Budget. By default every row trains until it converges: early stopping with ``--patience``
(2; the learning rate is halved after every epoch without a better validation perplexity)
up to ``--max-epochs`` (20), and the table says for each row whether it stopped on patience
or on the epoch cap. ``--fixed-budget moe=3`` gives rows whose cost makes convergence
impractical a fixed number of epochs, marked as such; ``-- --epochs N`` gives every row at
most N epochs (the 2-epoch comparisons of earlier versions).

Several values of ``--num-topics`` (e.g. ``50,100,150``: one run of each topic row per T, and
an NPMI-by-T table, the shape of the TCNLM paper's Table 4), ``--seeds`` (the table shows
mean ± standard deviation) and ``--learning-rates`` (every row trained at each; the table
keeps, per row, the rate with the best mean validation perplexity) multiply the runs.

Each run is one ``python -m train.run`` in ``<runs-dir>/<name>/<run>/`` (``<run>``: the row,
then ``-T<T>``, ``-seed<S>``, ``-lr<LR>`` where the comparison has several). A run that
already has its test perplexity is reused, one that stopped early is resumed from its
checkpoint: an interrupted comparison continues where it stopped when the same command is
run again. The same command with a larger ``--max-epochs`` (a setting of a comparison that
may change, only upwards) continues the rows that stopped on the old epoch cap; rows may join
with a ``--fixed-budget`` of their own while none of their runs exists.
For the topic models the command also writes their top words (``topics.txt``), NPMI
coherence and topic diversity (``coherence.json``, reference: the training split, window 20,
the toolkit convention of ``evaluate.coherence``). The
table goes to ``<runs-dir>/<name>/comparison.md`` and ``comparison.json``; validation
perplexity against training tokens for every run to ``valid_curves.png`` and to TensorBoard
(``<runs-dir>/<name>/tensorboard``, the curves overlaid). ``tensorboard --logdir
<runs-dir>/<name>`` also shows every run's own summaries and, in the HParams dashboard, one
row per run: its settings, validation and test perplexity, NPMI and topic diversity.

Records (``--record-dir DIR``, e.g. ``results/<name>`` in a git checkout). A long
comparison outlives processes and machines: the run directories belong outside the
checkout (``--runs-dir`` or ``$TCNLM_RUNS_DIR``), and as soon as a run is finished and
evaluated its record goes to ``DIR/<run>/``: ``metrics.json`` (the run's metrics with its
size, NPMI and ablation scores folded in), ``config.json``, ``topics.txt``,
``coherence.json``, ``ablations.json``; the comparison's ``compare.json``, table and curve
plot are rewritten there after every record. A run with a record counts as finished even
when its run directory is gone (another machine, a wiped scratch space): the table is
rebuilt from the records, and says which rows came from them. A finished row whose run
directory is here is evaluated again each time; where that differs from its record (its
NPMI under a new convention, say), the record is rewritten. ``--commit-records`` also
commits each new or rewritten record (only its own files) to the git repository ``DIR`` is
in, so a machine lost between two restarts loses no finished row.

Evidence. Every run records each test document's NLL and token count and what made it (the
commit, command, threads, CPU and library versions: :mod:`tcnlm_tf.runs.provenance`); records name
no path of the machine (``<data-dir>``). The table divides every row's test perplexity by the
row ``--reference`` (default ``lstm-document``) with a paired bootstrap 95 % interval over
test documents and seeds (:mod:`evaluate.intervals`) and names the commits of each row.

Arguments after ``--`` go to every ``train.run`` call (e.g. ``-- --context preceding``), a
model's own options only to the rows of models that take them. ``--jobs 2`` trains two runs
at a time, each writing its output to ``<runs-dir>/<name>/<run>.log``.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from evaluate.common import read_record
from evaluate.compare_report import (DIVERSITY_HEADER, DOCUMENT_LSTM, RunKey, ablation_table,
                                     aggregate, coherence_table, curves, curves_png,
                                     diversity_table, table, write_tensorboard)
from tcnlm_tf.arguments import MAX_SEED, dataset_name, finite_float, integer, integer_list
from tcnlm_tf.config import (DATASETS, PRESETS, RunConfig, default_cache_dir,
                             default_data_dir, default_runs_dir)
from tcnlm_tf.data.corpus import atomic_copy, write_bytes, write_text
from tcnlm_tf.errors import FILESYSTEM_ERRNOS, UserError, exit_on_user_error
from tcnlm_tf.models.registry import MODELS, all_options, compare_rows
from tcnlm_tf.runs import provenance
from tcnlm_tf.runs.directory import RunDirectory
from tcnlm_tf.runs.lock import holder, try_lock
from tcnlm_tf.runs.directory import read_json_object

#: row name -> (model, the train.run flags that make it besides the shared ones)
ROWS = compare_rows()
SETTINGS_FILE = "compare.json"
#: a run directory's files that go into its record besides the evaluated metrics.json
RECORD_FILES = ("config", "topics", "coherence", "ablations")
#: what to do about a damaged JSON file of a run or record, and about a damaged
#: ``ablations.json`` (made again where it is gone)
RESTORE = "restore it from a copy (git checkout -- FILE, for a committed record)"
RESTORE_ABLATIONS = ("delete it (evaluate.compare --ablations evaluates the ablations "
                     "again) or restore it from a copy")
#: the comparison's outputs copied to --record-dir
REPORT_FILES = ("comparison.md", "comparison.json", "valid_curves.png")
COMMIT_ATTEMPTS = 5
POLL_SECONDS = 2.0
#: how soon the loop notices a run that ended or a stop request
REACT_SECONDS = 0.05
#: how a training that was sent SIGTERM (or Ctrl-C) ends: train.run's 128 + the signal after
#: its checkpoint, or the signal itself when it came before train.run could catch it
STOPPED_EXITS = {128 + signal.SIGTERM, 128 + signal.SIGINT, -signal.SIGTERM, -signal.SIGINT}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False,
        prog="python -m evaluate.compare", description=__doc__.split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python -m evaluate.compare --dataset apnews --data-dir ../shared/data")
    p.add_argument("--dataset", type=dataset_name, default="synthetic", metavar="NAME",
                   help=f"corpus to compare on: {', '.join(DATASETS)} or the folder "
                   "<data-dir>/NAME of your own (default: synthetic)")
    p.add_argument("--data-dir", type=Path, default=default_data_dir(),
                   help="directory holding <dataset>/{train,valid,test}.txt")
    p.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                   help="prepared-corpus cache (shared with train.run)")
    p.add_argument("--models", default=",".join(ROWS),
                   help=f"comma-separated rows, from {', '.join(ROWS)} (default: all)")
    p.add_argument("--preset", choices=tuple(PRESETS), default="small",
                   help="size preset of the LSTM-based rows (default: small)")
    p.add_argument("--num-topics", type=integer_list(1), default=[50], metavar="T[,T...]",
                   help="topics T of the topic-model rows; several (e.g. 50,100,150) train "
                   "each topic row once per T (default: 50; the moe row keeps Table 6's 30 "
                   "experts)")
    p.add_argument("--seeds", "--seed", type=integer_list(0, MAX_SEED), default=[0],
                   metavar="S[,S...]",
                   help="seed of every run; several (e.g. 0,1,2) train each row once per "
                   "seed and report mean ± standard deviation (default: 0)")
    p.add_argument("--learning-rates", type=float_list, default=[], metavar="LR[,LR...]",
                   help="train every row at each rate and keep its best on mean validation "
                   "perplexity (default: train.run's rate, no search)")
    p.add_argument("--max-epochs", type=integer(1), default=20,
                   help="epoch cap of a row trained until it converges (default: 20)")
    p.add_argument("--patience", type=integer(1), default=2,
                   help="epochs without a better validation perplexity (each halving the "
                   "learning rate) before a row stops (default: 2)")
    p.add_argument("--fixed-budget", type=row_epochs, default={}, metavar="ROW=EPOCHS[,...]",
                   help="rows trained for a fixed number of epochs instead of until they "
                   "converge, e.g. moe=3 (marked in the table)")
    p.add_argument("--reference", default=DOCUMENT_LSTM, metavar="ROW",
                   help="the row every row's test perplexity is divided by in the column with "
                   "the paired bootstrap 95 %% interval (from the runs' per-document test "
                   f"scores; default: {DOCUMENT_LSTM})")
    p.add_argument("--ablations", action="store_true",
                   help="also score every topic row's test split with another document's "
                   "topics (shuffled) and with uninformative ones (uniform: 1/T; "
                   "Topic-RNN's theta at its prior mean 0), in a table beside the real "
                   "ones: a gain that survives shuffled topics is not topical")
    p.add_argument("--runs-dir", type=Path, default=default_runs_dir(),
                   help="where the comparison directory is made (default: $TCNLM_RUNS_DIR or "
                        f"./runs, now {default_runs_dir()})")
    p.add_argument("--name", help="comparison directory name (default: compare-<dataset>)")
    p.add_argument("--record-dir", type=Path, default=None, metavar="DIR",
                   help="write each finished row's record (metrics, config, topics, NPMI, "
                        "ablations) and the table to DIR as soon as it finishes, and count a "
                        "recorded row as finished even when its run directory is gone "
                        "(e.g. results/<name> in a git checkout; default: no records)")
    p.add_argument("--commit-records", action="store_true",
                   help="git-commit each new record (its own files only) in the repository "
                        "--record-dir is in")
    p.add_argument("--jobs", type=integer(1), default=1,
                   help="rows trained at the same time, each logging to <name>/<row>.log "
                   "(default: 1), each with an equal share of the CPUs for its thread pools")
    p.add_argument("train_args", nargs="*", metavar="-- TRAIN_FLAGS",
                   help="extra train.run flags for every row, after --")
    return p


def float_list(text: str) -> list[float]:
    """'1e-3,2e-3' -> [0.001, 0.002] (an argparse type)."""
    return [finite_float(x) for x in text.split(",") if x.strip()]


def row_epochs(text: str) -> dict[str, int]:
    """'moe=3,tcnlm=5' -> {'moe': 3, 'tcnlm': 5} (an argparse type)."""
    budget = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        row, _, epochs = item.partition("=")
        if row not in ROWS or not epochs.isdigit() or int(epochs) < 1:
            raise argparse.ArgumentTypeError(
                f"expected ROW=EPOCHS with a row from {', '.join(ROWS)} and EPOCHS >= 1, "
                f"got {item!r}")
        budget[row] = int(epochs)
    return budget


def parse_rows(text: str) -> list[str]:
    rows = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        raise UserError(f"--models {text!r}: unknown or empty; choose from {', '.join(ROWS)}")
    return rows


def recorded_settings(directory: Path, what: str) -> dict:
    """The settings of the comparison whose directory (or ``--record-dir``) ``directory``
    is, from its :data:`SETTINGS_FILE`; a :class:`UserError` that names the option ``what``
    gave it when there are none."""
    path = directory / SETTINGS_FILE
    if not path.is_file():
        raise UserError(f"{what} {directory}: no {SETTINGS_FILE} there; give the --record-dir "
                        "of an `evaluate.compare` run")
    return read_record(path, what)


def check_settings(directory: Path, settings: dict,
                   runs_of: Callable[[str], list[str]] = lambda row: []) -> None:
    """Refuses to mix runs made with different settings in one comparison directory; only
    ``max_epochs`` may grow (the rows that stopped on the old cap then train on), and
    ``fixed_budget`` may gain rows none of whose runs (``runs_of(row)``: their names) is in
    ``directory`` yet (a row added to the comparison at a fixed budget)."""
    path = directory / SETTINGS_FILE
    if path.is_file():
        saved = read_json_object(path, "restore it from a copy (git checkout -- FILE, for a "
                                       "committed record): it holds the comparison's settings")
        changed = sorted(k for k in settings.keys() | saved.keys()
                         if saved.get(k) != settings.get(k)
                         and k not in ("max_epochs", "fixed_budget", "data_dir"))
        if changed:
            raise UserError(f"{directory} holds a comparison made with other settings "
                            f"({', '.join(changed)} differ); use --name for a new one")
        old, new = saved.get("fixed_budget", {}), settings.get("fixed_budget", {})
        altered = sorted(row for row in old.keys() | new.keys() if old.get(row) != new.get(row)
                         and (row in old or any((directory / name).exists()
                                                for name in runs_of(row))))
        if altered:
            raise UserError(f"{directory} holds runs of {', '.join(altered)} under another "
                            "--fixed-budget; give the same budgets as before (a new row may "
                            "get one), or use --name for a new one")
        if settings.get("max_epochs", 0) < saved.get("max_epochs", 0):
            raise UserError(f"{directory} holds a comparison with --max-epochs "
                            f"{saved['max_epochs']}; it can grow, not shrink: give at least "
                            "that, or use --name for a new one")
    directory.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(settings, indent=2) + "\n")


def budget_flags(train_args: list[str]) -> list[str]:
    """The flags of ``train_args`` that a resumed run accepts (its training budget)."""
    from tcnlm_tf.cli.command_line import RESUMABLE, build_parser, explicit_settings

    explicit = explicit_settings(build_parser().parse_args(train_args))
    flags = []
    for name in sorted(RESUMABLE & explicit.keys()):
        flags += [f"--{name.replace('_', '-')}", str(explicit[name])]
    return flags


def finished(run_dir: Path) -> dict | None:
    """The metrics of the run in ``run_dir`` if it reached its test evaluation, else None."""
    path = RunDirectory(run_dir).metrics
    metrics = read_json_object(path, RESTORE) if path.is_file() else {}
    return metrics if "test_perplexity" in metrics else None


def below_cap(metrics: dict, key: RunKey, args: argparse.Namespace) -> int:
    """The epochs of a finished run (its ``metrics``) that stopped on an epoch cap below
    ``--max-epochs`` (it was trained with a smaller one), else 0; fixed budgets never grow."""
    if key.row in args.fixed_budget or fixed_epochs(args.train_args):
        return 0
    epochs = len(metrics["epochs"])
    return epochs if metrics.get("stopped") == "epochs" and epochs < args.max_epochs else 0


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


def row_command(row: str, run: str, directory: Path, shared: list[str], epochs: list[str],
                train_args: list[str], cache_dir: Path) -> list[str]:
    """The ``train.run`` command that trains the run ``run`` of row ``row``, or resumes it
    from its checkpoint (with the epoch budget ``epochs`` and the budget flags of
    ``train_args`` only)."""
    model, flags = ROWS[row]
    train_args = row_train_args(model, train_args)
    run_dir = directory / run
    command = [sys.executable, "-m", "train.run", "--runs-dir", str(directory),
               "--run-name", run, "--cache-dir", str(cache_dir)]
    if RunDirectory(run_dir).has_checkpoint():
        print(f"== {run}: resuming {run_dir} from its latest checkpoint", flush=True)
        return command + ["--resume"] + epochs + budget_flags(train_args)
    print(f"== {run}: training in {run_dir}", flush=True)
    return command + shared + flags + epochs + train_args


#: TensorFlow's thread-pool sizes (read from the environment when it starts)
THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def child_environment(jobs: int = 1) -> dict[str, str]:
    """The rows' environment: this one, with this project first on ``PYTHONPATH``, so that
    ``python -m train.run`` is this project's trainer from whatever directory the comparison
    was started in (its relative paths stay relative to that directory). With several
    ``jobs`` each run's TensorFlow thread pools get an equal share of the CPUs this process
    may use, unless the environment sizes them already: every TensorFlow process otherwise
    sizes its pools to all of them, and two runs on 2 cores then train 8-10 % slower
    (measured in RESULTS.md)."""
    paths = [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    if jobs > 1 and not any(name in os.environ for name in THREAD_VARIABLES):
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
        env.update({name: str(max(1, cpus // jobs)) for name in THREAD_VARIABLES})
    return env


def wait_for_any(running: dict, stop) -> None:
    """Return after ``POLL_SECONDS``, or as soon as one of the ``running`` processes (row ->
    (Popen, log)) has ended or ``stop`` (a :class:`train.stopping.StopRequests`) was asked
    for, looking every ``REACT_SECONDS``."""
    deadline = time.monotonic() + POLL_SECONDS
    while (time.monotonic() < deadline and not stop.requested
           and all(process.poll() is None for process, _ in running.values())):
        time.sleep(REACT_SECONDS)


def run_commands(commands: dict[str, list[str]], directory: Path, jobs: int,
                 on_success: Callable[[str], None] = lambda run: None
                 ) -> dict[str, Exception | None]:
    """Runs the commands (run name -> command), ``jobs`` at a time, calling
    ``on_success(run)`` as each one succeeds; returns the runs whose command failed (with
    None) or whose ``on_success`` failed (with its exception: the run trained), for
    :func:`failure_message` (the other runs go on either way).

    With one job the output goes to the terminal; with more, each run's output goes to
    ``<directory>/<run>.log`` (named when the run starts).

    On SIGTERM or Ctrl-C (:mod:`train.stopping`) no further run starts, the running ones get
    SIGTERM (each saves a checkpoint after its current step and exits), and once they have
    ended this exits with 128 + the signal's number and one line saying how to go on."""
    from train.stopping import StopRequests

    def succeed(row: str) -> None:
        try:
            on_success(row)
        except Exception as err:   # noqa: BLE001 - reported; the other runs must go on
            print(f"== {row}: trained, but {after_training(err)}", flush=True)
            failed[row] = err
        except SystemExit as err:  # an evaluation command's one-line error, printed above
            failed[row] = UserError(f"an evaluation command ended with exit status "
                                    f"{err.code} (its error is above)")
            print(f"== {row}: trained, but {after_training(failed[row])}", flush=True)

    env = child_environment(jobs)
    pending, running, stopped, signalled = list(commands), {}, [], False
    failed: dict[str, Exception | None] = {}
    with StopRequests() as stop:
        while running or (pending and not stop.requested):
            while pending and len(running) < jobs and not stop.requested:
                row = pending.pop(0)
                log = open(directory / f"{row}.log", "a", encoding="utf-8") if jobs > 1 else None
                if log is not None:
                    print(f"== {row}: output in {log.name}", flush=True)
                running[row] = (subprocess.Popen(
                    commands[row], env=env, stdout=log,
                    stderr=None if log is None else subprocess.STDOUT), log)
            wait_for_any(running, stop)
            if stop.requested and not signalled:
                signalled = True
                for process, _ in running.values():
                    if process.poll() is None:
                        process.send_signal(signal.SIGTERM)
            for row, (process, log) in list(running.items()):
                if process.poll() is None:
                    continue
                if log is not None:
                    log.close()
                    print(f"== {row}: its process ended (exit {process.returncode})", flush=True)
                del running[row]
                if stop.requested and process.returncode in STOPPED_EXITS:
                    stopped.append(row)
                elif process.returncode:
                    failed[row] = None
                else:
                    succeed(row)
    if stop.requested:
        print(f"stopped by {stop.cause}: "
              + (f"{', '.join(stopped)} stopped at their last checkpoint; " if stopped else "")
              + (f"{', '.join(failed)} failed (see their output); " if failed else "")
              + (f"{', '.join(pending)} did not start; " if pending else "")
              + "run the same command again to go on (finished runs are kept, the others "
              "resume)", file=sys.stderr, flush=True)
        raise SystemExit(stop.exit_code)
    return failed


def after_training(error: Exception) -> str:
    """What went wrong after a run trained (evaluating or recording it), in a few words: a
    file that could not be written is named, with the reason."""
    if isinstance(error, OSError) and error.errno in FILESYSTEM_ERRNOS and error.filename:
        return f"could not write {error.filename}: {error.strerror}"
    if isinstance(error, UserError):
        return f"evaluating or recording it failed: {error}"
    return f"evaluating or recording it failed: {type(error).__name__}: {error}"


def failure_message(failed: dict[str, Exception | None], directory: Path) -> str:
    """One line for the runs that failed (:func:`run_commands`): those whose training
    failed, and those that trained but were not evaluated or recorded, each with its
    cause (never "training failed" for a run that trained)."""
    untrained = [run for run, error in failed.items() if error is None]
    causes = ([f"training failed for {', '.join(untrained)} (messages above or in "
               f"{directory}/<run>.log)"] if untrained else [])
    causes += [f"{run} trained, but {after_training(error)}"
               for run, error in failed.items() if error is not None]
    return ("; ".join(causes) + "; fix the cause (free space, if the disk is full) and run "
            "the same command again: finished runs are kept, the others resume")


def topic_evaluations(run_dir: Path) -> dict:
    """Top-10 words (``topics.txt``) and NPMI coherence (``coherence.json``) of a topic run;
    returns the coherence without the top words it scored (those stay in its file)."""
    from evaluate import coherence, topics

    topics.main(["--run", str(run_dir), "--top-n", "10"])
    result = coherence.main(["--run", str(run_dir)])
    return {key: value for key, value in result.items() if key != "top_words"}


def ablation_flags(run_dir: Path) -> dict[str, list[str]]:
    """The evaluations of a topic run's ablations, as ``evaluate.perplexity`` flags by name:
    shuffled and uninformative ("uniform") topics and, for a sentence-mode run trained under
    ``rest``, the preceding text only (``preceding``: how Zheng, Vafa and Blei's code scores
    a model trained on the rest of each document)."""
    config = RunConfig.load(RunDirectory(run_dir).config)
    flags = {source: ["--topics", source] for source in ("shuffled", "uniform")}
    if config.model.mode == "sentence" and config.data.context == "rest":
        flags["preceding"] = ["--context", "preceding"]
    return flags


def ablation_evaluations(run_dir: Path) -> dict[str, float]:
    """Test perplexity of a topic run under each of its :func:`ablation_flags`, computed
    once into ``ablations.json`` (an ablation it lacks is computed and added)."""
    path = RunDirectory(run_dir).ablations
    result = read_json_object(path, RESTORE_ABLATIONS) if path.is_file() else {}
    missing = {name: flags for name, flags in ablation_flags(run_dir).items()
               if name not in result}
    if missing:
        from evaluate import perplexity

        for name, flags in missing.items():
            result[name] = perplexity.main(["--run", str(run_dir), *flags])["perplexity"]
        write_text(path, json.dumps(result, indent=2) + "\n")
    return result


def evaluated(run_dir: Path, metrics: dict, model: str, ablations: bool) -> dict:
    """The ``metrics`` of the finished run in ``run_dir`` (as :func:`finished` read them)
    with its ``size`` and, for a topic model (``model``: its registry name), its
    ``coherence`` (and with ``ablations`` its ``ablations`` scores), as JSON gives them back
    (string keys), so that they equal what the run's record reads back."""
    metrics = {**metrics, "size": size_of(run_dir)}
    if MODELS[model].has_topics:
        metrics["coherence"] = topic_evaluations(run_dir)
        if ablations:
            metrics["ablations"] = ablation_evaluations(run_dir)
    return json.loads(json.dumps(provenance.portable(metrics, data_dir_of(run_dir)),
                                 default=float))


def data_dir_of(run_dir: Path) -> str:
    """The data directory the run in ``run_dir`` read its corpus from (its config.json)."""
    return RunConfig.load(RunDirectory(run_dir).config).data.data_dir


def write_record(record_dir: Path, run_dir: Path, metrics: dict) -> list[Path]:
    """The record of a finished run in ``record_dir/<run>/``: its evaluated ``metrics`` as
    ``metrics.json`` and its :data:`RECORD_FILES` (:class:`RunDirectory` files); returns the
    files written."""
    target = record_dir / run_dir.name
    target.mkdir(parents=True, exist_ok=True)
    written = []
    data_dir = data_dir_of(run_dir)
    for name in RECORD_FILES:
        path = getattr(RunDirectory(run_dir), name)
        if not path.is_file():
            continue
        if path.suffix == ".json":     # the machine's paths written as <data-dir>
            advice = RESTORE_ABLATIONS if name == "ablations" else RESTORE
            text = json.dumps(provenance.portable(read_json_object(path, advice), data_dir),
                              indent=2)
            write_text(target / path.name, text + "\n")
        else:
            atomic_copy(path, target / path.name)
        written.append(target / path.name)
    write_text(target / "metrics.json", json.dumps(metrics, indent=2, default=float) + "\n")
    return written + [target / "metrics.json"]


def record_message(record_dir: Path, name: str, metrics: dict) -> str:
    """The commit message of run ``name``'s record in ``record_dir``."""
    return (f"results: {record_dir.name}/{name}, test perplexity "
            f"{metrics['test_perplexity']:.2f} after {len(metrics['epochs'])} epochs "
            f"({metrics.get('stopped')})")


def git_toplevel(directory: Path) -> Path:
    """The root of the git work tree ``directory`` is in, or :class:`UserError`."""
    result = subprocess.run(["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
                            capture_output=True, text=True)
    if result.returncode:
        raise UserError(f"--commit-records: {directory} is not inside a git work tree "
                        f"({result.stderr.strip() or 'git failed'}); give a --record-dir "
                        "inside one, or leave out --commit-records")
    return Path(result.stdout.strip())


def shown_record_dir(record_dir: Path) -> str:
    """``record_dir`` as the comparison's table names it: relative to the root of the git
    work tree it is in (``results/<name>``, the same on every machine), else as given."""
    result = subprocess.run(["git", "-C", str(record_dir), "rev-parse", "--show-prefix"],
                            capture_output=True, text=True)
    prefix = result.stdout.strip().rstrip("/")
    return prefix if result.returncode == 0 and prefix else str(record_dir)


def uncommitted(folder: Path) -> list[Path]:
    """The files in ``folder`` (a record) that git does not have as they are: new or
    changed since the last commit, e.g. a record written by a comparison whose commit
    failed or that was stopped between writing and committing it."""
    result = subprocess.run(["git", "-C", str(folder), "status", "--porcelain",
                             "--untracked-files=all", "--", "."],
                            capture_output=True, text=True)
    names = {line[3:].strip().strip('"').rsplit("/", 1)[-1]
             for line in result.stdout.splitlines()}
    return sorted(path for path in folder.iterdir() if path.name in names)


def commit_files(paths: list[Path], message: str) -> None:
    """``git add`` and ``git commit --only`` of ``paths`` (nothing else that is staged),
    retried while another git process holds the index lock. A failure is printed, not
    raised: the record is on disk either way."""
    top = git_toplevel(paths[0].parent)
    files = [str(p.resolve()) for p in paths]
    error = ""
    for _ in range(COMMIT_ATTEMPTS):
        add = subprocess.run(["git", "-C", str(top), "add", "--", *files],
                             capture_output=True, text=True)
        result = add if add.returncode else subprocess.run(
            ["git", "-C", str(top), "commit", "-q", "--only", "-m", message, "--", *files],
            capture_output=True, text=True)
        if result.returncode == 0:
            print(f"== committed: {message}", flush=True)
            return
        error = (result.stderr + result.stdout).strip()
        if "index.lock" not in error:
            break
        time.sleep(POLL_SECONDS)
    if "nothing" in error and "commit" in error:
        print(f"== {message}: already committed", flush=True)
    else:
        print(f"== warning: could not commit the record ({error.splitlines()[-1:] or 'git'}); "
              "it is on disk", flush=True)


def size_of(run_dir: Path) -> str:
    """``layers x hidden`` (and ``T`` for the topic models) from the run's config.json."""
    model = RunConfig.load(RunDirectory(run_dir).config).model
    size = f"{model.num_layers}x{model.hidden_size}"
    if "num_topics" in model.options:
        size += f", T={model.options['num_topics']}"
    return size


def fixed_epochs(train_args: list[str]) -> bool:
    """Whether ``train_args`` fix every row's epochs (``--epochs N``)."""
    return any(a == "--epochs" or a.startswith("--epochs=") for a in train_args)


def run_keys(rows: list[str], args: argparse.Namespace) -> list[RunKey]:
    """Every run of the comparison, row by row."""
    keys = []
    for row in rows:
        model, flags = ROWS[row]
        takes_topics = "num_topics" in MODELS[model].option_names and "--num-topics" not in flags
        for topics in (args.num_topics if takes_topics else [None]):
            for seed in args.seeds:
                for rate in args.learning_rates or [None]:
                    keys.append(RunKey(row, topics, seed, rate))
    return keys


def run_flags(key: RunKey, args: argparse.Namespace) -> list[str]:
    """The ``train.run`` flags of one run besides its row's and its epoch budget: its seed,
    topic count and learning rate."""
    flags = ["--seed", str(key.seed)]
    if key.topics is not None:
        flags += ["--num-topics", str(key.topics)]
    if key.learning_rate is not None:
        flags += ["--learning-rate", f"{key.learning_rate:g}"]
    return flags


def epoch_flags(key: RunKey, args: argparse.Namespace) -> list[str]:
    """The ``train.run`` flags of one run's epoch budget (none where ``-- --epochs N`` fixes
    every row's)."""
    if key.row in args.fixed_budget:
        epochs = args.fixed_budget[key.row]   # no early stop within the budget
        return ["--epochs", str(epochs), "--patience", str(epochs + 1)]
    if fixed_epochs(args.train_args):
        return []
    return ["--epochs", str(args.max_epochs), "--patience", str(args.patience)]


def settings(args: argparse.Namespace) -> dict:
    """What a comparison directory fixes (``compare.json``). A single seed or topic count is
    stored as a number and the convergence settings only where they apply, so the
    directories of earlier versions still match."""
    saved = {"dataset": args.dataset, "data_dir": provenance.DATA_DIR,
             "preset": args.preset,
             "num_topics": args.num_topics[0] if len(args.num_topics) == 1 else args.num_topics,
             "seed": args.seeds[0] if len(args.seeds) == 1 else args.seeds,
             "train_args": args.train_args}
    if not fixed_epochs(args.train_args):
        saved.update(max_epochs=args.max_epochs, patience=args.patience)
    if args.fixed_budget:
        saved["fixed_budget"] = args.fixed_budget
    if args.learning_rates:
        saved["learning_rates"] = args.learning_rates
    return saved


def check_arguments(args: argparse.Namespace) -> list[str]:
    """The rows, after every check of the arguments that needs no training."""
    rows = parse_rows(args.models)
    if args.reference not in ROWS:
        raise UserError(f"--reference {args.reference!r}: unknown row; choose from "
                        f"{', '.join(ROWS)}")
    for name, values in (("--num-topics", args.num_topics), ("--seeds", args.seeds)):
        if not values or len(set(values)) != len(values):
            raise UserError(f"{name} needs distinct values, got {values}")
    if args.learning_rates and (min(args.learning_rates) <= 0
                                or len(set(args.learning_rates)) != len(args.learning_rates)):
        raise UserError(f"--learning-rates needs distinct positive values, got "
                        f"{args.learning_rates}")
    unused = sorted(set(args.fixed_budget) - set(rows))
    if unused:
        raise UserError(f"--fixed-budget names rows that are not compared: {', '.join(unused)}")
    budget_flags(args.train_args)  # unknown train.run flags fail here, before any training
    owned = {"--max-steps": "it would stop the runs before their test evaluation; bound a "
                            "comparison with --max-epochs or -- --epochs",
             "--seed": "use evaluate.compare's --seeds",
             "--num-topics": "use evaluate.compare's --num-topics"}
    if args.learning_rates:
        owned["--learning-rate"] = "--learning-rates sets each run's rate"
    if args.fixed_budget:
        owned["--epochs"] = "it fixes every row's epochs; use it or --fixed-budget"
    for flag, hint in owned.items():
        if any(a == flag or a.startswith(flag + "=") for a in args.train_args):
            raise UserError(f"{flag} cannot follow --: {hint}")
    return rows


def report(args: argparse.Namespace, directory: Path, runs: dict[RunKey, dict],
           names: dict[RunKey, str], from_records: list[str] = ()) -> str:
    """Writes ``comparison.md``, ``comparison.json``, ``valid_curves.png`` and the
    TensorBoard curves of the finished ``runs`` (``from_records``: the runs read from their
    records, without a run directory); returns the Markdown. TensorBoard's curves that
    cannot be written (a full disk, a read-only folder) are a warning naming the files
    written without them."""
    from train.summaries import write_or_warn

    entries = aggregate(runs, args.fixed_budget)
    budget = ("epochs as in the train.run flags" if fixed_epochs(args.train_args) else
              f"until converged: patience {args.patience}, at most {args.max_epochs} epochs")
    title = (f"Test perplexity on {args.dataset} ({args.preset} preset, {budget}, "
             f"seed{'s' if len(args.seeds) > 1 else ''} {','.join(map(str, args.seeds))}"
             + (f", train.run flags {' '.join(args.train_args)}" if args.train_args else "")
             + ")")
    text = title + "\n\n" + table(entries, next(iter(runs.values()))["baselines"],
                                  args.reference)
    by_topics = coherence_table(entries)
    if by_topics:
        text += "\nNPMI (mean of top 5/10/15/20) by number of topics\n\n" + by_topics
    diversities = diversity_table(entries)
    if diversities:
        text += f"\n{DIVERSITY_HEADER.capitalize()} by number of topics\n\n" + diversities
    if from_records:
        text += (f"\nRead from their records in {shown_record_dir(args.record_dir)} (no run "
                 f"directory here): {', '.join(from_records)}\n")
    ablations = ablation_table(entries)
    if ablations:
        causal = ("; the preceding text only: a row trained on the rest of each document "
                  "scored with only the sentences before each one as its context, as Zheng, "
                  "Vafa and Blei's code evaluates" if "preceding text only" in ablations else "")
        text += ("\nTest perplexity of the topic rows with their own topics, another "
                 "document's and uninformative ones (uniform proportions 1/T; Topic-RNN's "
                 f"theta at its prior mean 0){causal}\n\n" + ablations)
    points = curves({names[key]: metrics for key, metrics in runs.items()})
    png = curves_png(points, f"{args.dataset}: validation perplexity")
    write_text(directory / "comparison.md", text)
    write_text(directory / "comparison.json", json.dumps(
        {"runs": {names[key]: metrics for key, metrics in runs.items()},
         "rows": [{k: v for k, v in e.items() if k != "documents"} for e in entries.values()]},
        indent=2, default=float) + "\n")
    write_bytes(directory / "valid_curves.png", png)
    board = directory / "tensorboard"
    shutil.rmtree(board, ignore_errors=True)
    write_or_warn(board, "the comparison's curves", lambda: write_tensorboard(board, points, png),
                  written=f"{directory / 'comparison.md'}, comparison.json and valid_curves.png")
    return text


def copy_report(directory: Path, record_dir: Path) -> None:
    """The comparison's :data:`REPORT_FILES` from ``directory`` to ``record_dir``, each
    copied atomically: a copy that fails (a full disk) leaves the record's old file whole."""
    for file in REPORT_FILES:
        atomic_copy(directory / file, record_dir / file)


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, dict]:
    args = build_parser().parse_args(argv)
    rows = check_arguments(args)
    directory = args.runs_dir / (args.name or f"compare-{args.dataset}")
    # one comparison per directory: a second one (a resubmitted job) would train its rows
    # beside the first one's and tabulate them; the kernel frees the lock however we end
    lock = try_lock(directory)
    if lock is None:
        raise UserError(f"{directory} is in use by {holder(directory)}: another "
                        "evaluate.compare is running this comparison; wait for it to end "
                        "(it resumes where it stopped if restarted), or use another --name")
    with lock:
        return _compare(args, rows, directory)


def _compare(args: argparse.Namespace, rows: list[str], directory: Path) -> dict[str, dict]:
    """The comparison of ``rows`` in ``directory`` (locked by :func:`main`)."""
    shared = ["--dataset", args.dataset, "--preset", args.preset] + (
        [] if args.dataset == "synthetic" else ["--data-dir", str(args.data_dir)])
    record_dir = args.record_dir
    if args.commit_records:
        if record_dir is None:
            raise UserError("--commit-records needs --record-dir (where the records go)")
        record_dir.mkdir(parents=True, exist_ok=True)
        git_toplevel(record_dir)
    keys = run_keys(rows, args)
    names = {key: key.name(len(args.num_topics), len(args.seeds), len(args.learning_rates))
             for key in keys}

    def runs_of(row: str) -> list[str]:
        return [names[key] for key in keys if key.row == row]

    check_settings(directory, settings(args), runs_of)
    if record_dir is not None:
        check_settings(record_dir, settings(args), runs_of)
    commands = {}
    for key in keys:
        name = names[key]
        metrics = finished(directory / name)
        if metrics is None and record_dir is not None and finished(record_dir / name):
            print(f"== {name}: recorded in {record_dir / name}, no run directory here; "
                  "counted as finished", flush=True)
            continue
        if metrics is not None:
            epochs = below_cap(metrics, key, args)
            if not epochs:
                print(f"== {name}: reusing {directory / name} (already evaluated)", flush=True)
                continue
            print(f"== {name}: stopped on the epoch cap after {epochs} "
                  f"epoch{'s' * (epochs != 1)}; training on "
                  f"to --max-epochs {args.max_epochs}", flush=True)
            RunDirectory(directory / name).ablations.unlink(missing_ok=True)   # old weights
        commands[name] = row_command(key.row, name, directory, shared + run_flags(key, args),
                                     epoch_flags(key, args), args.train_args, args.cache_dir)

    order = sorted(keys, key=lambda k: list(ROWS).index(k.row))
    runs: dict[RunKey, dict] = {}
    from_records: list[str] = []

    pending: list[tuple[list[Path], str]] = []    # records written, not yet published

    def collect(key: RunKey, fresh: bool = False) -> None:
        """``runs[key]`` from the run directory where it is finished (and its record,
        written where it is new, ``fresh`` or evaluated differently now, e.g. its NPMI
        under a new convention), else from its record. A record rewritten keeps what this
        command did not evaluate (its ablation scores, without ``--ablations``)."""
        name, run_dir = names[key], directory / names[key]
        metrics = finished(run_dir)
        recorded = finished(record_dir / name) if record_dir is not None else None
        if metrics is None:
            if recorded:
                runs[key] = recorded
                from_records.append(name)
            return
        runs[key] = evaluated(run_dir, metrics, ROWS[key.row][0], args.ablations)
        if record_dir is None:
            return
        record = runs[key] if fresh or recorded is None else {**recorded, **runs[key]}
        if record == recorded and not fresh:
            left = uncommitted(record_dir / name) if args.commit_records else []
            if left:                 # written before, its commit never made
                pending.append((left, record_message(record_dir, name, record)))
            return
        changed = [] if fresh or recorded is None else sorted(
            k for k in record if recorded.get(k) != record[k])
        written = write_record(record_dir, run_dir, record)
        again = f" again ({', '.join(changed)} evaluated anew)" if changed else ""
        print(f"== {name}: recorded in {record_dir / name}{again}", flush=True)
        pending.append((written, record_message(record_dir, name, record) + again))
        if fresh:
            publish()

    def publish() -> None:
        """The table and curve plot of every row collected so far to ``record_dir``, and
        (``--commit-records``) the records written since the last call committed, each
        on its own, the last with the table and plot."""
        report(args, directory, {k: runs[k] for k in order if k in runs}, names,
               from_records)
        copy_report(directory, record_dir)
        if args.commit_records:
            shared_files = [record_dir / SETTINGS_FILE] + [record_dir / f for f in REPORT_FILES]
            for index, (written, message) in enumerate(pending):
                last = index == len(pending) - 1
                commit_files(written + (shared_files if last else []), message)
        pending.clear()

    for key in order:               # rows finished before this command, and recorded ones
        if names[key] not in commands:
            collect(key)
    if pending:                     # records of those, written or rewritten just now
        publish()
    by_name = {names[key]: key for key in keys}
    failed = run_commands(commands, directory, args.jobs,
                          on_success=lambda name: collect(by_name[name], fresh=True))
    if failed:
        raise UserError(failure_message(failed, directory))
    runs = {key: runs[key] for key in order}
    text = report(args, directory, runs, names, from_records)
    if record_dir is not None:
        copy_report(directory, record_dir)
    print("\n" + text)
    print(f"written to {directory / 'comparison.md'}, comparison.json and valid_curves.png "
          f"(TensorBoard: tensorboard --logdir {shlex.quote(str(directory))}, with the "
          "HParams dashboard of every run; the curves overlaid in its tensorboard/); topics "
          "and coherence in each topic model's run directory"
          + (f"; records in {record_dir}" if record_dir is not None else ""))
    return {names[key]: metrics for key, metrics in runs.items()}


if __name__ == "__main__":
    main()
