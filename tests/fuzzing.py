"""``python -m tests.fuzzing``: every option of every command, given non-finite, zero,
negative and huge values, each case run as the command line runs it and
sorted by what the user sees.

Each command runs in this process (``main(argv)``, so TensorFlow starts once) against a
small workspace: a tiny TCNLM run and its export, a tiny SDLM run, a corpus-format text
file and a raw text file, and a stand-in TF Serving server for ``evaluate.serving_client``.
Every option that takes a value is given each of :data:`VALUES` (``--flag=value``, so
``-1`` is read as a value), on top of a small command line that works (:func:`commands`).

A case ends in one of

- ``refused``: a non-zero exit whose last stderr line is the error (argparse's
  ``prog: error: ...`` or the project's ``error: ...``), with nothing in the trained runs
  changed;
- ``ran``: exit 0 (the value is valid for that option: e.g. ``--seed 0``);
- ``traceback``, ``timeout``, ``changed a run`` (a refused case that wrote into a run), or
  ``noisy refusal`` (a non-zero exit without a one-line error): the bad outcomes.

``--commands`` picks commands; ``--quick`` stops commands that train or benchmark once
their flags are checked (at the functions :func:`quick_stops` names), and ``--typed-only``
leaves out options that take any text (paths, names): the test runs both.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from http.server import HTTPServer
from pathlib import Path

from tools.commands import capture_parser

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: non-finite, zero, negative, huge (a float, one past float64, past int64 and past int32)
VALUES = ("nan", "inf", "-inf", "0", "-1", "1e30", "1e400", "99999999999999999999",
          "2147483648")
#: outcomes that are not a one-line error or a result
BAD = ("traceback", "timeout", "changed a run", "noisy refusal")


@dataclass(frozen=True)
class Case:
    command: str
    option: str
    value: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    case: Case
    kind: str
    detail: str
    seconds: float


class _Timeout(Exception):
    pass


def _raise_timeout(*_) -> None:
    raise _Timeout


class _Stopped(Exception):
    """Raised in place of a quick command's expensive stage: its flags were accepted."""


def _tiny() -> list[str]:
    from tests.conftest import TINY
    return list(TINY)


def build_workspace(root: Path) -> dict[str, Path]:
    """Train and export what the commands need, under ``root``; returns the paths."""
    from tests.conftest import TINY_MODELS
    from train.export import main as export_main
    from train.run import main as train_main

    paths = {"root": root, "runs": root / "runs", "cache": root / "cache"}
    for name in ("tcnlm", "sdlm"):
        with contextlib.redirect_stdout(io.StringIO()):
            train_main(_tiny() + TINY_MODELS[name] + [
                "--runs-dir", str(paths["runs"]), "--cache-dir", str(paths["cache"]),
                "--run-name", name])
        paths[name] = paths["runs"] / name
    with contextlib.redirect_stdout(io.StringIO()):
        paths["export"] = export_main(["--run", str(paths["tcnlm"]), "--output-dir",
                                       str(root / "saved_models")])
    from tcnlm_tf.runs.loading import load_run
    from evaluate.common import split_file
    with contextlib.redirect_stdout(io.StringIO()):
        paths["text"] = split_file(load_run(paths["tcnlm"]), "test")
    raw = root / "raw.txt"
    raw.write_text("".join(f"the cat sat on mat number {i} . it was fine .\n"
                           for i in range(30)), encoding="utf-8")
    paths["raw"] = raw
    paths["records"] = write_records(root / "records")
    return paths


def write_records(root: Path) -> Path:
    """Hand-made records of two APNEWS comparisons (``rest/``, ``preceding/``), as
    ``evaluate.compare --record-dir`` writes them, for the commands that read records, and a
    finished LSTM run (``finished/``: the tiny runs stop before their test evaluation) for
    ``evaluate.record``."""
    import json

    settings = {"dataset": "apnews", "data_dir": "/data", "preset": "small", "num_topics": 50,
                "seed": 0, "max_epochs": 30, "patience": 2, "train_args": []}
    coherence = {"reference": "apnews/train.txt", "window": 20, "mean": 0.05,
                 "per_n": {"5": 0.08, "10": 0.06, "15": 0.04, "20": 0.02}}
    rows = {"rest": {"lstm": 72.0, "lstm-document": 66.0, "tcnlm": 70.0},
            "preceding": {"tcnlm": 71.0}}
    for protocol, tests in rows.items():
        flags = [] if protocol == "rest" else ["--context", "preceding"]
        (root / protocol).mkdir(parents=True)
        (root / protocol / "compare.json").write_text(json.dumps(
            {**settings, "train_args": flags}))
        for name, test in tests.items():
            (root / protocol / name).mkdir()
            metrics = {"model": "lstm" if name.startswith("lstm") else name,
                       "test_perplexity": test, "stopped": "early_stopping",
                       "epochs": [{"epoch": 1}]}
            options = {}
            if name == "tcnlm":
                metrics["coherence"], options = coherence, {"num_topics": 50}
            (root / protocol / name / "metrics.json").write_text(json.dumps(metrics))
            (root / protocol / name / "config.json").write_text(json.dumps(
                {"data": {"context": protocol}, "model": {"options": options}}))
    (root / "finished").mkdir()
    (root / "finished" / "config.json").write_text(json.dumps(
        {"model": {"model": "lstm", "num_layers": 1, "hidden_size": 16, "options": {}}}))
    (root / "finished" / "metrics.json").write_text(json.dumps(
        {"model": "lstm", "test_perplexity": 30.0, "stopped": "epochs", "epochs": [{}]}))
    return root


def commands(ws: dict[str, Path], url: str) -> dict[str, list[str]]:
    """A small working command line of every command; the fuzzed option replaces (or is
    added to) it. What a case writes goes under its own working directory (relative paths),
    so no case sees another's output. ``evaluate.serving_client``'s sub-commands are
    separate entries."""
    # the prepared corpora go into one shared cache
    train = _tiny() + ["--model", "tcnlm", "--num-topics", "4", "--num-factors", "8",
                       "--runs-dir", "runs", "--cache-dir", str(ws["cache"]),
                       "--run-name", "case"]
    run = ["--run", str(ws["tcnlm"])]
    client = ["--url", url, "--model", "tcnlm"]
    return {
        "train.run": train,
        "train.prepare": ["--input", str(ws["raw"]), "--output", "prepared", "--force"],
        "train.export": run + ["--output-dir", "exports"],
        "train.status": ["--runs-dir", str(ws["tcnlm"].parent)],
        "train.word2vec": _tiny()[:12] + ["--cache-dir", str(ws["cache"]), "--dim", "8",
                                          "--epochs", "1", "--output", "vectors.txt"],
        "benchmarks.run": ["--sections", "recurrent", "--warmup", "0", "--rounds", "1",
                           "--steps", "1", "--precisions", "float32", "--batch-size", "4",
                           "--seq-len", "3", "--input-size", "8", "--hidden-size", "8",
                           "--num-factors", "4", "--num-topics", "4", "--moe-experts", "2"],
        "evaluate.compare": ["--models", "lstm", "--max-epochs", "1", "--runs-dir", "runs",
                             "--cache-dir", str(ws["cache"]), "--name", "case", "--",
                             *_tiny()[:-6]],
        "evaluate.coherence": run,
        "evaluate.curve": run + ["--output", "curve.png"],
        "evaluate.generate": run + ["--topic", "0", "--num", "1", "--max-words", "4"],
        "evaluate.gradients": train[:-2],
        "evaluate.infer": run,
        "evaluate.knowledge_base": _tiny()[:12] + ["--cache-dir", str(ws["cache"])],
        "evaluate.perplexity": run,
        "evaluate.recovery": run,
        "evaluate.scalars": run,
        "evaluate.score": ["--saved-model", str(ws["export"]), "--text-file",
                           str(ws["text"])],
        "evaluate.sememes": ["--run", str(ws["sdlm"])],
        "evaluate.serving_client score": client + ["score", "a b c"],
        "evaluate.serving_client next-words": client + ["next-words", "a b"],
        "evaluate.serving_client topics": client + ["topics", "a b c"],
        "evaluate.serving_client generate": client + ["generate", "--topic", "0"],
        "evaluate.topics": run,
        "evaluate.record": ["--run", str(ws["records"] / "finished"), "--record-dir",
                            "records"],
        "evaluate.protocols": ["--rest", str(ws["records"] / "rest"), "--preceding",
                               str(ws["records"] / "preceding"), "--output", "protocols.md"],
        "evaluate.topic_counts": ["--records", str(ws["records"] / "rest"), "--output",
                                  "counts.md"],
        "evaluate.beside_paper": ["--records", str(ws["records"] / "rest"), "--output",
                                  "beside.md"],
    }


def quick_stops() -> dict[str, tuple[str, str]]:
    """With ``--quick``: the function each training or benchmarking command calls once its
    flags are checked, replaced by one that stops the case as ``ran``."""
    return {"train.run": ("train.run", "_train"),
            "evaluate.compare": ("evaluate.compare", "run_commands"),
            "benchmarks.run": ("benchmarks.run", "machine_line"),
            "train.word2vec": ("train.word2vec", "train_vectors")}


def typed(action: argparse.Action) -> bool:
    """Whether the option's type refuses a word (a number, a list of numbers, KEY=VALUE),
    unlike paths, names and texts, which take any value."""
    if action.type is None or action.choices:
        return False
    try:
        action.type("abc")
    except Exception:   # noqa: BLE001 - argparse's kinds, or a parser's own UserError
        return True
    return False


def value_options(module: str, argv: list[str], typed_only: bool = False) -> list[str]:
    """The options of ``module``'s parser (the sub-command's, for the serving client) that
    take a value (``typed_only``: a value of a checked type, :func:`typed`), by their first
    name; the parser as the flag reference captures it (a staged one merged whole)."""
    parser = capture_parser(module)
    actions = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            actions += action.choices[[a for a in argv if a in action.choices][0]]._actions
    return [a.option_strings[0] for a in actions
            if a.option_strings and a.nargs != 0 and a.option_strings[0] != "--help"
            and (typed(a) or not typed_only)]


#: options that take another's place (argparse allows only one of them)
INSTEAD_OF = {"--mixture": "--topic"}
#: the train.run-style commands, whose base line trains TCNLM
TRAINING_COMMANDS = ("train.run", "evaluate.gradients", "evaluate.knowledge_base")


def owner_flags(option: str) -> list[str]:
    """For a train.run model option of another model than TCNLM: the flags that make the
    base line train a model that has it (the first one, with its tiny test flags), so the
    value reaches the option's own checks instead of "does not apply"; for
    ``--knowledge-base``, the sememe decoder it belongs to."""
    from tcnlm_tf.models.registry import MODELS, all_options, models_with
    if option == "--knowledge-base":
        return ["--decoder", "sdlm"]
    names = [n for n, o in all_options().items() if o.option_string == option]
    owners = models_with(names[0]) if names else ["tcnlm"]
    if "tcnlm" in owners:
        return []
    return ["--model", owners[0], *MODELS[owners[0]].test_flags]


def without(base: list[str], options: set[str]) -> list[str]:
    """``base`` without ``options`` and their values."""
    out, skip = [], False
    for token in base:
        if skip:
            skip = False
        elif token in options:
            skip = True
        else:
            out.append(token)
    return out


def with_value(base: list[str], option: str, value: str) -> list[str]:
    """``base`` without ``option`` (and its value, and the option it takes the place of),
    with ``option=value`` added before a ``--`` or at the end (a serving-client
    sub-command's options after its name)."""
    out = without(base, {option, INSTEAD_OF.get(option)})
    cut = out.index("--") if "--" in out else len(out)
    return out[:cut] + [f"{option}={value}"] + out[cut:]


def cases(ws: dict[str, Path], url: str, only: set[str] | None = None,
          typed_only: bool = False) -> list[Case]:
    out = []
    for name, base in commands(ws, url).items():
        if only and name.split()[0] not in only and name not in only:
            continue
        module = name.split()[0]
        for option in value_options(module, base, typed_only):
            line, owner = base, owner_flags(option)
            if name in TRAINING_COMMANDS and owner:       # TCNLM's own flags out
                line = without(base, {"--num-factors", "--num-topics", *owner[::2]}) + owner
            for value in VALUES:
                out.append(Case(name, option, value, tuple(with_value(line, option, value))))
    return out


def _snapshot(directories: list[Path]) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for d in directories for p in sorted(d.rglob("*")) if p.is_file()}


def run_case(case: Case, watched: list[Path], timeout: float, quick: bool) -> Outcome:
    """Run one case in this process; classify what the user would see."""
    import keras

    module = importlib.import_module(case.command.split()[0])
    stops = quick_stops() if quick else {}
    patched = None
    if case.command in stops:
        where, name = stops[case.command]
        target = importlib.import_module(where)

        def stop(*args, **kwargs):
            raise _Stopped

        patched = (target, name, getattr(target, name))
        setattr(target, name, stop)
    before = _snapshot(watched)
    out, err = io.StringIO(), io.StringIO()
    kind, detail = "ran", ""
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            module.main(list(case.argv))
    except _Stopped:
        pass
    except _Timeout:
        kind, detail = "timeout", f"no end within {timeout:g} s"
    except SystemExit as stop:
        if stop.code not in (0, None):
            lines = [line for line in err.getvalue().splitlines() if line.strip()]
            last = lines[-1] if lines else ""
            one_line = (last.startswith("error: ") or ": error: " in last) and \
                "Traceback" not in err.getvalue()
            kind, detail = ("refused" if one_line else "noisy refusal"), last
    except BaseException as error:   # noqa: BLE001 - what the user would see as a traceback
        kind = "traceback"
        detail = "".join(traceback.format_exception_only(error)).strip().splitlines()[-1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if patched:
            setattr(*patched)
        keras.mixed_precision.set_global_policy("float32")
    seconds = time.perf_counter() - start
    if kind == "refused" and _snapshot(watched) != before:
        kind = "changed a run"
    return Outcome(case, kind, detail[:300], seconds)


def serve(export: Path) -> tuple[str, HTTPServer]:
    """The tests' stand-in TF Serving REST server, serving ``export`` as model ``tcnlm``."""
    import tensorflow as tf

    from tests.serving_stub import PredictHandler
    PredictHandler.models = {"tcnlm": tf.saved_model.load(str(export))}
    httpd = HTTPServer(("127.0.0.1", 0), PredictHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd


def fuzz(root: Path, only: set[str] | None = None, timeout: float = 120.0,
         quick: bool = False, typed_only: bool = False, progress=None) -> list[Outcome]:
    """Build the workspace under ``root`` and run every case (``only``: these commands;
    ``quick`` and ``typed_only``: see :func:`main`)."""
    ws = build_workspace(root)
    url, httpd = serve(ws["export"])
    here = Path.cwd()
    try:
        outcomes = []
        for number, case in enumerate(cases(ws, url, only, typed_only)):
            scratch = root / "cwd" / str(number)    # where the values' relative paths land
            scratch.mkdir(parents=True)
            os.chdir(scratch)
            outcomes.append(run_case(case, [ws["tcnlm"], ws["sdlm"], ws["records"]], timeout,
                                     quick))
            if progress:
                progress(outcomes[-1])
        return outcomes
    finally:
        os.chdir(here)
        httpd.shutdown()


def report(outcomes: list[Outcome]) -> str:
    """The per-command counts, the count line, every bad case and every value that ran."""
    by_command: dict[str, Counter] = {}
    for o in outcomes:
        by_command.setdefault(o.case.command, Counter())[o.kind] += 1
    lines = ["| command | cases | one-line error | ran (valid value) | bad |",
             "| --- | --- | --- | --- | --- |"]
    for command, counts in by_command.items():
        bad = sum(counts[k] for k in BAD)
        lines.append(f"| `{command}` | {sum(counts.values())} | {counts['refused']} | "
                     f"{counts['ran']} | {bad} |")
    total = Counter(o.kind for o in outcomes)
    lines.append(f"\n{len(outcomes)} cases: {total['refused']} one-line errors, "
                 f"{total['ran']} ran, {sum(total[k] for k in BAD)} bad")
    for o in outcomes:
        if o.kind in BAD:
            lines.append(f"BAD {o.kind}: {o.case.command} {o.case.option}={o.case.value}: "
                         f"{o.detail}")
    ran: dict[tuple[str, str], list[str]] = {}
    for o in outcomes:
        if o.kind == "ran":
            ran.setdefault((o.case.command, o.case.option), []).append(o.case.value)
    lines.append("\nvalues that ran:")
    lines += [f"  {c} {opt}: {' '.join(v)}" for (c, opt), v in ran.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Outcome]:
    p = argparse.ArgumentParser(prog="python -m tests.fuzzing", allow_abbrev=False,
                                description=__doc__.split(": ", 1)[1].split("\n\n")[0])
    p.add_argument("--commands", default="",
                   help="comma list of commands (default: all), e.g. evaluate.topics")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a case may run before it counts as a hang (default: 120)")
    p.add_argument("--quick", action="store_true",
                   help="stop training and benchmarking commands once their flags are checked")
    p.add_argument("--typed-only", action="store_true",
                   help="only the options of a checked type (numbers, lists, KEY=VALUE), not "
                        "paths, names and texts")
    args = p.parse_args(argv)
    only = {c for c in args.commands.split(",") if c} or None

    def progress(o: Outcome):
        print(f"{o.kind:>13} {o.seconds:6.1f}s {o.case.command} {o.case.option}="
              f"{o.case.value}: {o.detail[:150]}", flush=True)

    with tempfile.TemporaryDirectory(prefix="tcnlm-fuzz-") as tmp:
        outcomes = fuzz(Path(tmp), only, args.timeout, args.quick, args.typed_only, progress)
    print(report(outcomes))
    return outcomes


if __name__ == "__main__":
    sys.exit(1 if any(o.kind in BAD for o in main()) else 0)
