"""The commands that read a file back, each as a :class:`~tests.faults.scene.Step` on a
case's copies: its command line, what it may rewrite and how its result is judged.

A reader's exit 0 is right when its result equals the good workspace's, or when it says
which file it passed over (a fallback with a warning, a cache prepared again); anything
else reported as success is silently wrong.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Callable

from tests.faults.files import unreadable
from tests.faults.outcomes import Result
from tests.faults.scene import Scene, Step
from tests.faults.workspace import (MORE_STEPS, TCNLM, TINY, compare_flags, fresh_flags,
                                    plain, resume_flags)

#: what training a run may rewrite in it (a resume writes its new budget into config.json),
#: and a damaged cache prepared again
TRAINING_OUTPUTS = ("runs/*/checkpoints/*", "runs/*/best/*", "runs/*/tensorboard/*",
                    "runs/*/metrics.json", "runs/*/config.json", "cache/prepared/*",
                    "cache/synthetic-*")


def own_names(target: Path | None) -> tuple[str, ...]:
    """The names of ``target`` itself: the file's, and a checkpoint's prefix
    (``ckpt-95`` for ``ckpt-95.index``)."""
    if target is None:
        return ()
    prefix = target.name.split(".")[0]
    return (target.name,) + ((prefix,) if re.search(r"-\d+$", prefix) else ())


def names_of(target: Path | None) -> tuple[str, ...]:
    """What an error about ``target`` names: the file, a checkpoint's prefix or its folder."""
    return own_names(target) + ((str(target.parent),) if target is not None else ())


def mentions(result: Result, target: Path | None) -> bool:
    """Whether the command's output names ``target`` itself (a notice about it)."""
    text = result.stdout + "\n" + result.stderr
    return any(name in text for name in own_names(target))


def same(got, want, tolerance: float = 1e-9) -> bool:
    """Numbers (in lists and dicts alike) equal within ``tolerance`` relative; the rest
    equal."""
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            same(got[k], want[k], tolerance) for k in want)
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(want) and all(
            same(g, w, tolerance) for g, w in zip(got, want))
    if isinstance(want, float) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=tolerance) or (math.isnan(got) and
                                                               math.isnan(want))
    return got == want


def relocated(value, scene: Scene):
    """``value`` with the case folder's paths written as the workspace's (a unit copied
    into a case keeps its layout), so that results naming files compare."""
    if isinstance(value, str):
        return value.replace(str(scene.root), str(scene.ws.units))
    if isinstance(value, dict):
        return {k: relocated(v, scene) for k, v in value.items()}
    if isinstance(value, list):
        return [relocated(v, scene) for v in value]
    return value


def as_good(value: Callable[[Result], object], good, target: Path | None,
            what: str, tolerance: float = 1e-9) -> Callable[[Result], str | None]:
    """A check: the result's ``value`` equals ``good``, or the command named ``target``."""
    def check(result: Result) -> str | None:
        got = plain(value(result))
        if same(got, good, tolerance) or mentions(result, target):
            return None
        return (f"{what} is {str(got)[:60]} where the good files give {str(good)[:60]}, and "
                f"nothing said {target.name if target else 'a file'} was damaged")
    return check


def refuse(what: str) -> Callable[[Result], str | None]:
    """A check for a fault no run should take: any exit 0 is wrong."""
    return lambda result: f"it went on with {what}"


def perplexity(scene: Scene, target: Path | None, run: str = "done") -> Step:
    """``evaluate.perplexity`` of a run (``done``, or ``sdlm`` of the ``sdlm`` unit)."""
    runs = scene.unit("runs" if run == "done" else run)
    return Step(["--run", str(runs / run)], target,
                check=as_good(lambda r: r.returned["perplexity"],
                              scene.ws.good[f"perplexity:{run}"], target, "the perplexity"),
                names=names_of(target))


def perplexity_of_text(scene: Scene, target: Path | None) -> Step:
    """``evaluate.perplexity --text-file`` of ``done`` on its test text: the words read
    through the run's own vocabulary (as an export and ``tcnlm_tf.load`` read them)."""
    run = scene.unit("runs") / "done"
    text = next(scene.cache.glob("synthetic-*")) / "test.txt"
    return Step(["--run", str(run), "--text-file", str(text)], target,
                check=as_good(lambda r: r.returned["perplexity"],
                              scene.ws.good["perplexity-text:done"], target, "the perplexity"),
                names=names_of(target))


def resume(scene: Scene, target: Path | None) -> Step:
    """``train.run --resume`` of ``done`` for two steps into a second epoch; right when it
    went on from its newest checkpoint (that of its last step) or said what it passed
    over."""
    runs = scene.unit("runs")
    steps = scene.ws.good["steps"]

    def check(result: Result) -> str | None:
        found = re.search(r"resumed from (\S+):", result.stdout)
        metrics = json.loads((runs / "done" / "metrics.json").read_text())
        if metrics.get("steps") != steps + MORE_STEPS:
            return f"metrics.json says step {metrics.get('steps')}, not {steps + MORE_STEPS}"
        if len(metrics.get("epochs", [])) != 1 and not mentions(result, target):
            return (f"metrics.json lists {len(metrics.get('epochs', []))} finished epochs "
                    "instead of 1, without a word")
        if found and int(found.group(1).rsplit("-", 1)[-1]) < steps and not mentions(result,
                                                                                      target):
            return f"it resumed from {found.group(1)} without a word about the newest"
        return None

    return Step(resume_flags(runs, scene.cache, steps), target, TRAINING_OUTPUTS, check,
                names_of(target))


def export(scene: Scene, target: Path | None) -> Step:
    """``train.export`` of ``done``; right when it exported the best weights or said what
    it passed over."""
    run = scene.unit("runs") / "done"
    out = scene.root / "exported"

    def check(result: Result) -> str | None:
        found = re.search(r"exporting (\S+) ", result.stdout)
        if not (out / "done" / "1" / "saved_model.pb").is_file():
            return "no saved_model.pb was written"
        if found and Path(found.group(1)).parent.name != "best" and not mentions(result,
                                                                                  target):
            return f"it exported {found.group(1)} without a word about best/"
        return None

    return Step(["--run", str(run), "--output-dir", str(out)], target, (), check,
                names_of(target))


def evaluator(command: str, outputs: tuple[str, ...], value: Callable[[Result], object],
              good: str, extra: tuple[str, ...] = ()) -> Callable[[Scene, Path | None], Step]:
    """An evaluator of ``done`` that writes ``outputs`` in it and returns ``value``, which
    must equal the workspace's ``good[good]``."""
    def step(scene: Scene, target: Path | None) -> Step:
        run = scene.unit("runs") / "done"
        want = plain(value(Result(0, returned=scene.ws.good[good])))
        return Step(["--run", str(run), *extra], target, outputs,
                    as_good(lambda r: relocated(plain(value(r)), scene), want, target,
                            f"{command}'s result"), names_of(target))
    step.__doc__ = f"``{command}`` of ``done``."
    return step


topics = evaluator("evaluate.topics", ("runs/done/topics.txt", "runs/done/tensorboard/*"),
                   lambda r: r.returned, "topics")
infer = evaluator("evaluate.infer", ("runs/done/topics_doc0.png", "runs/done/tensorboard/*"),
                  lambda r: r.returned["topics"], "infer")
coherence = evaluator("evaluate.coherence", ("runs/done/coherence.json",),
                      lambda r: r.returned, "coherence")
recovery = evaluator("evaluate.recovery", ("runs/done/recovery.json",),
                     lambda r: r.returned, "recovery")
scalars = evaluator("evaluate.scalars", (), lambda r: r.returned, "scalars",
                    ("--tag", "train/loss"))


def curve(scene: Scene, target: Path | None) -> Step:
    """``evaluate.curve`` of ``done`` into a PNG beside the case."""
    run, png = scene.unit("runs") / "done", scene.root / "curve.png"

    def check(result: Result) -> str | None:
        return unreadable(png) and f"curve.png {unreadable(png)}"

    return Step(["--run", str(run), "--output", str(png)], target, (), check,
                names_of(target))


def status(scene: Scene, target: Path | None) -> Step:
    """``train.status`` of the runs folder: right when it names the damaged file."""
    runs = scene.unit("runs")

    def check(result: Result) -> str | None:
        return None if mentions(result, target) else (
            f"the table shows the run without a word about {target.name if target else '?'}")

    return Step(["--runs-dir", str(runs)], target, (), check, names_of(target))


def record(scene: Scene, target: Path | None) -> Step:
    """``evaluate.record`` of ``done`` into a record folder beside the case."""
    run, out = scene.unit("runs") / "done", scene.root / "rec"
    good = json.loads((scene.pristine(run / "metrics.json")).read_text())["test_perplexity"]

    def check(result: Result) -> str | None:
        path = out / "done" / "metrics.json"
        why = unreadable(path)
        if why:
            return f"the record's metrics.json {why}"
        got = json.loads(path.read_text())["test_perplexity"]
        return None if same(got, good) else f"the record says {got}, the run {good}"

    return Step(["--run", str(run), "--record-dir", str(out)], target,
                ("runs/done/topics.txt", "runs/done/coherence.json", "runs/done/tensorboard/*"),
                check, names_of(target))


def compare(scene: Scene, target: Path | None) -> Step:
    """``evaluate.compare`` of the ``compare`` unit (its one row finished: evaluated and
    recorded again, not trained)."""
    base = scene.unit("compare")
    good = scene.ws.good["compare"]["tcnlm"]["test_perplexity"]
    return Step(compare_flags(base, scene.cache), target, ("compare/*",),
                as_good(lambda r: r.returned["tcnlm"]["test_perplexity"], good, target,
                        "the table's perplexity"), names_of(target))


def topic_counts(scene: Scene, target: Path | None) -> Step:
    """``evaluate.topic_counts`` of the ``compare`` unit's records."""
    records = scene.unit("compare") / "records"
    return Step(["--records", str(records), "--output", str(scene.root / "counts.md")],
                target, (), None, names_of(target))


def fresh(scene: Scene, target: Path | None, cache: Path | None = None,
          runs: Path | None = None) -> Step:
    """A new tiny run (into ``runs``, by default a folder of the case) on ``cache`` (by
    default the case's copy of the good one); right when its numbers and vocabularies are
    those of a run on the good cache."""
    reference = scene.ws.unit("reference") / "fresh"
    good = scene.ws.good["fresh"]
    keys = ("test_perplexity", "baselines")
    runs = runs or scene.root / "fresh"

    def check(result: Result) -> str | None:
        got = plain({k: result.returned.get(k) for k in keys})
        if not same(got, {k: good[k] for k in keys}) and not mentions(result, target):
            return (f"its test perplexity and baselines are {got} where the good cache gives "
                    f"{ {k: good[k] for k in keys} }")
        for name in ("lm_vocab.txt", "topic_vocab.txt"):
            if (runs / "fresh" / name).read_bytes() != (reference / name).read_bytes():
                return f"the run's {name} differs from the one the good cache gives"
        return None

    return Step(fresh_flags(runs, cache or scene.cache), target, ("cache/*",), check,
                names_of(target))


def score(scene: Scene, target: Path | None) -> Step:
    """``evaluate.score`` of the export of ``done``."""
    exports = scene.unit("exports")
    return Step(["--saved-model", str(exports / "done" / "1"), "--text-file",
                 str(exports / "test.txt")], target, (),
                as_good(lambda r: relocated(plain(r.returned), scene), scene.ws.good["score"],
                        target, "the score"),
                names_of(target))


def embeddings(scene: Scene, target: Path | None) -> Step:
    """A new tiny run initialised from the word2vec file (``--embeddings``)."""
    vectors = scene.unit("vectors") / "vectors.bin"
    return Step(TINY + TCNLM + ["--embeddings", str(vectors), "--runs-dir",
                                str(scene.root / "fresh"), "--cache-dir", str(scene.cache),
                                "--run-name", "vectors"], target, ("cache/*",),
                refuse("a damaged vectors file"), names_of(target))


def own_corpus(scene: Scene, target: Path | None) -> Step:
    """A new tiny run on the corpus ``train.prepare`` wrote (``--dataset mycorpus``); right
    when it names the damaged file (the lines it skipped)."""
    data = scene.unit("corpus") / "data"
    sizes = TINY[TINY.index("--hidden-size"):]

    def check(result: Result) -> str | None:
        return None if mentions(result, target) else "it said nothing about the damage"

    return Step(["--dataset", "mycorpus", "--data-dir", str(data), *sizes, *TCNLM,
                 "--runs-dir", str(scene.root / "fresh"), "--cache-dir", str(scene.cache),
                 "--run-name", "own"], target, ("cache/*",), check, names_of(target))


#: every reader by the command it runs (the name a case's ``command`` gives)
READERS: dict[str, Callable[[Scene, Path | None], Step]] = {
    "evaluate.perplexity": perplexity,
    "evaluate.perplexity (sdlm)": lambda scene, target: perplexity(scene, target, "sdlm"),
    "evaluate.perplexity --text-file": perplexity_of_text,
    "train.run --resume": resume, "train.export": export,
    "evaluate.topics": topics, "evaluate.infer": infer, "evaluate.coherence": coherence,
    "evaluate.recovery": recovery, "evaluate.scalars": scalars, "evaluate.curve": curve,
    "train.status": status, "evaluate.record": record, "evaluate.compare": compare,
    "evaluate.topic_counts": topic_counts, "train.run": fresh, "evaluate.score": score,
    "train.run --embeddings": embeddings, "train.run --dataset": own_corpus}


def module_of(command: str) -> str:
    """The module a reader's name runs (``train.run --resume`` runs ``train.run``)."""
    return command.split()[0]
