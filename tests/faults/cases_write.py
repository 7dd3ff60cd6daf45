"""Every command that writes, with the folder it writes into full (``disk-full``: a tmpfs
filled to the brim, or one that fills during the command; and ``ENOSPC`` injected at one
write where a tmpfs cannot isolate it), read-only (``read-only``), or the command killed
with SIGKILL at the moment it writes a file (``killed``); and the run directory deleted
while its training runs (``removed``).

The next normal command runs once the disk is freed or the folder writable again; after a
kill, the same command again is the next normal command, and what it finds (half-written,
temporary or orphaned files) must not fool it or stay behind.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from tests.faults import inject, mounts
from tests.faults.readers import READERS, TRAINING_OUTPUTS, names_of
from tests.faults.scene import Case, Scene, Step
from tests.faults.workspace import SYNTHETIC

#: free bytes on the tmpfs of a run that fills during training: the first checkpoint of
#: the resumed epoch fits, a later write does not
ROOM_DURING = 150_000


class Unavailable(Exception):
    """The fault cannot be made here (no mounts): the case is skipped."""


def _mounted(kind: str) -> Callable:
    """``mounts.full_disk`` or ``mounts.read_only``, or :class:`Unavailable`."""
    why = mounts.unavailable()
    if why:
        raise Unavailable(why)
    return mounts.full_disk if kind == "disk-full" else mounts.read_only


# ------------------------------------------------------------------- the writers
def fresh_run(scene: Scene, where: str) -> tuple[Step, Path]:
    """A new run (:func:`tests.faults.readers.fresh`: its numbers must be those of a run on
    the good cache); ``where`` is at fault: ``runs`` (its runs folder) or ``cache`` (an
    empty cache folder it prepares the corpus into)."""
    if where == "runs":
        folder = scene.folder("newruns")
        return READERS["train.run"](scene, None, runs=folder), folder
    folder = scene.folder("newcache")
    return READERS["train.run"](scene, None, cache=folder, runs=scene.folder("fresh")), folder


def prepare(scene: Scene, folder: Path, force: bool = False) -> Step:
    raw = scene.unit("corpus") / "raw.txt"
    return Step(["--input", str(raw), "--output", str(folder / "mycorpus")]
                + (["--force"] if force else []))


def word2vec(scene: Scene, output: Path) -> Step:
    return Step(SYNTHETIC + ["--cache-dir", str(scene.cache), "--dim", "12", "--epochs", "1",
                             "--min-count", "1", "--output", str(output)])


def curve(scene: Scene, folder: Path) -> Step:
    return Step(["--run", str(scene.unit("runs") / "done"), "--output",
                 str(folder / "curve.png")])


def score(scene: Scene, folder: Path) -> Step:
    step = READERS["evaluate.score"](scene, None)
    step.argv += ["--output", str(folder / "score.json")]
    return step


def record_older(scene: Scene) -> None:
    """The compare unit's row record without its ``size`` (as an earlier version wrote it),
    so that ``evaluate.compare`` writes the record again."""
    path = scene.unit("compare") / "records" / "tcnlm" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics.pop("size", None)
    path.write_text(json.dumps(metrics, indent=2) + "\n")


# ------------------------------------------------------- faults on the folder written
def on_folder(kind: str, target: str, command: str, fault: str,
              place: Callable[[Scene], tuple[Step, Path]], room: int = 0, known: str = "",
              quick: bool = False) -> Case:
    """A case of ``command`` (its step and the folder at fault from ``place``) with that
    folder full (``room`` bytes left) or read-only."""
    def setup(scene: Scene) -> Step:
        step, folder = place(scene)
        context = _mounted(kind)
        lift = scene.enter(context(folder, room) if kind == "disk-full" else context(folder))
        step.target, step.lift = folder, lift
        step.names = (str(folder),)
        return step

    return Case(kind, target, command, fault, setup,
                variant=f"{room // 1000} KB left" if room else "", known=known, quick=quick)


def reader_on(command: str, unit: str = "runs") -> Callable[[Scene], tuple[Step, Path]]:
    """``command`` as a reader of its good files, its ``unit`` (copied) at fault."""
    def place(scene: Scene) -> tuple[Step, Path]:
        folder = scene.unit(unit)
        step = READERS[command](scene, None)
        return step, folder
    return place


def in_folder(name: str, make: Callable[[Scene, Path], Step]) -> Callable:
    def place(scene: Scene) -> tuple[Step, Path]:
        folder = scene.folder(name)
        return make(scene, folder), folder
    return place


def whole_epoch(scene: Scene) -> tuple[Step, Path]:
    """``--resume`` of ``done`` for a whole second epoch (validation, best/, test)."""
    step = READERS["train.run --resume"](scene, None)
    step.argv, step.check = step.argv[:step.argv.index("--max-steps")], None
    return step, scene.unit("runs")


def tensorboard_of(command: str) -> Callable[[Scene], tuple[Step, Path]]:
    def place(scene: Scene) -> tuple[Step, Path]:
        return READERS[command](scene, None), scene.unit("runs") / "done" / "tensorboard"
    return place


def export_into(scene: Scene) -> tuple[Step, Path]:
    folder = scene.folder("exported")
    return READERS["train.export"](scene, None), folder


def record_into(scene: Scene) -> tuple[Step, Path]:
    folder = scene.folder("rec")
    return READERS["evaluate.record"](scene, None), folder


def compare_part(part: str) -> Callable[[Scene], tuple[Step, Path]]:
    def place(scene: Scene) -> tuple[Step, Path]:
        step = READERS["evaluate.compare"](scene, None)
        return step, scene.unit("compare") / part
    return place


#: the known faults, as the report names them
TENSORBOARD = "evaluate.topics/evaluate.infer traceback when tensorboard/ is unwritable"
COPYFILE = "compare --record-dir copyfile damaging a record on a full disk"
MESSAGE = "atomic_write's ENOSPC message without the path"
PNG = "0-byte PNG after a failed evaluate.infer"


def folder_cases(kind: str) -> list[Case]:
    """Every writer with its folder ``kind`` (``disk-full`` or ``read-only``)."""
    cases = [
        on_folder(kind, "runs folder (new run)", "train.run", "", lambda s: fresh_run(s, "runs"),
                  quick=kind == "disk-full"),
        on_folder(kind, "cache folder (new cache)", "train.run", "",
                  lambda s: fresh_run(s, "cache")),
        on_folder(kind, "run folder", "train.run --resume", "", reader_on("train.run --resume")),
        on_folder(kind, "run folder", "evaluate.topics", "", reader_on("evaluate.topics")),
        on_folder(kind, "run folder", "evaluate.infer", "", reader_on("evaluate.infer")),
        on_folder(kind, "run folder", "evaluate.coherence", "", reader_on("evaluate.coherence")),
        on_folder(kind, "run folder", "evaluate.recovery", "", reader_on("evaluate.recovery")),
        on_folder(kind, "run folder", "evaluate.perplexity", "",
                  reader_on("evaluate.perplexity")),
        on_folder(kind, "export folder", "train.export", "", export_into),
        on_folder(kind, "comparison folder", "evaluate.compare", "", compare_part("runs")),
        on_folder(kind, "record folder", "evaluate.compare", "", compare_part("records"),
                  known=COPYFILE),
        on_folder(kind, "record folder", "evaluate.record", "", record_into),
        on_folder(kind, "prepare output folder", "train.prepare", "",
                  in_folder("prepared", prepare)),
        on_folder(kind, "word2vec output folder", "train.word2vec", "",
                  in_folder("w2v", lambda s, f: word2vec(s, f / "vectors.bin"))),
        on_folder(kind, "plot folder", "evaluate.curve", "", in_folder("plots", curve)),
        on_folder(kind, "score output folder", "evaluate.score", "",
                  in_folder("scores", score)),
    ]
    if kind == "disk-full":
        cases.append(on_folder(kind, "run folder", "train.run --resume",
                               "the disk fills during the epoch", whole_epoch, ROOM_DURING,
                               quick=True))
    else:
        cases += [on_folder(kind, "run/tensorboard", command, "", tensorboard_of(command),
                            known=TENSORBOARD, quick=command == "evaluate.topics")
                  for command in ("evaluate.topics", "evaluate.infer")]
        cases.append(on_folder(kind, "cache folder (complete)", "train.run", "",
                               reader_on("train.run", "cache")))
    fault = "full: a tmpfs filled to the brim" if kind == "disk-full" else \
        "read-only: a bind mount remounted ro"
    return [Case(c.kind, c.target, c.command, c.fault or fault, c.setup, c.variant, c.known,
                 c.quick) for c in cases]


# ------------------------------------------------------------ ENOSPC at one write
def injected(target: str, command: str, match: str, known: str,
             before: Callable[[Scene], None] | None = None, quick: bool = False) -> Case:
    """``command`` (as a reader of the good files) with ``ENOSPC`` at the writes into paths
    containing ``match``."""
    def setup(scene: Scene) -> Step:
        if before:
            before(scene)
        step = READERS[command](scene, None)
        step.fault = lambda: inject.NoSpace(match)
        step.names = (match.strip("/"),)
        return step
    return Case("disk-full", target, command, f"ENOSPC injected at the write of *{match}*",
                setup, variant="injected", known=known, quick=quick)




def injected_cases() -> list[Case]:
    return [
        injected("records/comparison.md", "evaluate.compare", "records/comparison.md",
                 COPYFILE, quick=True),
        injected("records/tcnlm/topics.txt", "evaluate.compare", "records/tcnlm/topics.txt",
                 COPYFILE, record_older),
        injected("run/metrics.json", "train.run --resume", "metrics.json", MESSAGE,
                 quick=True),
        injected("run/topics_doc0.png", "evaluate.infer", "topics_doc0.png", PNG, quick=True),
    ]


# ------------------------------------------------------------- killed mid-write
def killed(target: str, command: str, hook: str, match: str, place: Callable[[Scene], Step],
           known: str = "", quick: bool = False) -> Case:
    """``command`` killed with SIGKILL at its write ``hook`` of a path containing ``match``
    (:mod:`tests.faults.killer`), then run again."""
    def setup(scene: Scene) -> Step:
        step = place(scene)
        step.kill = {"hook": hook, "match": match}
        step.names = names_of(Path(match))
        return step
    return Case("killed", target, command, f"SIGKILL at the {hook} of *{match}*", setup,
                known=known, quick=quick)


def reader(command: str, before: Callable[[Scene], None] | None = None) -> Callable:
    def place(scene: Scene) -> Step:
        if before:
            before(scene)
        return READERS[command](scene, None)
    return place


def first(place: Callable[[Scene], tuple[Step, Path]]) -> Callable[[Scene], Step]:
    return lambda scene: place(scene)[0]


STALE = "stale .<name>.<pid>.tmp files"
DEBRIS = "checkpoint debris (ckpt-N_temp, checkpoint.tmp*, orphan checkpoints)"
RESUME = "train.run --resume"


def killed_cases() -> list[Case]:
    return [
        killed("run/checkpoints/ckpt-N", RESUME, "merge", "/checkpoints/ckpt-", reader(RESUME),
               DEBRIS, quick=True),
        killed("run/checkpoints/checkpoint", RESUME, "tf_rename", "/checkpoints/checkpoint",
               reader(RESUME), DEBRIS),
        killed("run/checkpoints/resume-state-N.npz", RESUME, "write", "resume-state-",
               reader(RESUME), STALE),
        killed("run/metrics.json", RESUME, "write", "/metrics.json", reader(RESUME), STALE),
        killed("run/best/ckpt-N", RESUME, "merge", "/best/ckpt-", first(whole_epoch), DEBRIS),
        killed("run/config.json", "train.run", "write", "/config.json",
               first(lambda s: fresh_run(s, "runs")), STALE),
        killed("cache/train-00000.h5", "train.run", "write", "train-00000.h5",
               first(lambda s: fresh_run(s, "cache"))),
        killed("cache/prepared folder", "train.run", "write", "prepared/synthetic-",
               first(lambda s: fresh_run(s, "cache"))),
        killed("cache/synthetic/train.txt", "train.run", "write", "/train.txt",
               first(lambda s: fresh_run(s, "cache")), STALE),
        killed("export/<version>", "train.export", "write", "/exported/done/1",
               first(export_into)),
        killed("export/variables", "train.export", "merge", "/variables/variables",
               first(export_into)),
        killed("records/tcnlm/topics.txt", "evaluate.compare", "write",
               "records/tcnlm/topics.txt", reader("evaluate.compare", record_older), COPYFILE),
        killed("records/valid_curves.png", "evaluate.compare", "write",
               "records/valid_curves.png", reader("evaluate.compare"), COPYFILE),
        killed("comparison/valid_curves.png", "evaluate.compare", "write",
               "cmp/valid_curves.png", reader("evaluate.compare")),
        killed("run/topics_doc0.png", "evaluate.infer", "write", "topics_doc0.png",
               reader("evaluate.infer"), PNG, quick=True),
        killed("run/topics.txt", "evaluate.topics", "write", "/topics.txt",
               reader("evaluate.topics"), STALE),
        killed("run/coherence.json", "evaluate.coherence", "write", "/coherence.json",
               reader("evaluate.coherence"), STALE),
        killed("run/recovery.json", "evaluate.recovery", "write", "/recovery.json",
               reader("evaluate.recovery"), STALE),
        killed("record/done/metrics.json", "evaluate.record", "write", "rec/done/metrics.json",
               first(record_into), STALE),
        killed("corpus/valid.txt", "train.prepare", "write", "mycorpus/valid.txt",
               lambda s: prepare(s, s.unit("corpus") / "data", force=True), STALE),
        killed("vectors/vectors.bin", "train.word2vec", "write", "vectors.bin",
               lambda s: word2vec(s, s.unit("vectors") / "vectors.bin"), STALE),
        killed("plots/curve.png", "evaluate.curve", "write", "curve.png",
               first(in_folder("plots", curve))),
    ]


# ------------------------------------------------------- the run folder deleted
def run_removed(scene: Scene) -> Step:
    """The run directory deleted during its training: the run is gone, so success would be
    a lie; the next command (evaluating it) shows what is left."""
    step = READERS[RESUME](scene, None)
    run = scene.unit("runs") / "done"
    step.fault = lambda: inject.RunRemoved(run)
    step.target, step.names, step.outputs = run, (str(run),), TRAINING_OUTPUTS
    step.follow_on, step.follow = "success", ("evaluate.perplexity", ["--run", str(run)])
    step.check = None
    return step


def write_cases() -> list[Case]:
    return (folder_cases("disk-full") + injected_cases() + folder_cases("read-only")
            + killed_cases() + [
                Case("removed", "run folder", RESUME, "deleted during training", run_removed,
                     variant="during training",
                     known="run dir deleted during training reported as success",
                     quick=True)])
