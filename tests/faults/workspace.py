"""The small workspace the fault cases copy from: tiny runs and everything the commands
write from them, each kind in a folder of its own (a *unit*), built once and only where a
case needs it, with what each good unit gives (the numbers a case compares with).

Units (under ``<root>/units``; a case copies the ones it uses into its own folder):

``cache``    the prepared corpus cache (``prepared/`` shards, manifest, counts,
             vocabularies) and the synthetic corpus it was prepared from
``runs``     ``done``: a finished tiny TCNLM run of one epoch with two training checkpoints
             (step 2, and the epoch's end: ``good["steps"]``), ``best/``, ``tensorboard/``,
             ``metrics.json`` and the evaluators' files (``topics.txt``,
             ``coherence.json``, ``recovery.json``, ``topics_doc0.png``, and
             ``ablations.json`` as ``evaluate.compare --ablations`` writes it)
``sdlm``     ``sdlm``: a tiny SDLM run (its ``knowledge_base.npz``)
``reference`` ``fresh``: a new run on the good cache, whose numbers a run on a damaged
             cache must give
``exports``  ``done/1``, the export of ``done`` (``train.export``), and the text it scores
``compare``  ``runs/cmp``: an ``evaluate.compare`` of one row (``done`` again) and
             ``records/``: the records its ``--record-dir`` keeps
``corpus``   ``data/mycorpus``: what ``train.prepare`` writes from ``raw.txt``
``vectors``  ``vectors.bin``: what ``train.word2vec`` writes
``legacy``   the runs and export of an earlier version (``tests/data/legacy``)

The tiny runs use the option fuzzer's flags (:data:`tests.conftest.TINY`), and the
hand-made records of :func:`tests.fuzzing.write_records` stand for records of an earlier
version.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, TINY_MODELS

LEGACY = REPO_ROOT / "tests" / "data" / "legacy"
TCNLM = TINY_MODELS["tcnlm"]
#: the synthetic corpus settings of TINY (what train.word2vec and a fresh run read)
SYNTHETIC = TINY[:TINY.index("--hidden-size")]
#: the steps a resume of the finished run takes into its second epoch
MORE_STEPS = 2


def plain(value) -> object:
    """``value`` as JSON gives it back (numpy numbers and arrays as Python's, keys as
    strings): how the good results are kept and the cases' results compared with them."""
    return json.loads(json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist")
                                 else str(o)))


def quietly(function: Callable, *args):
    """``function(*args)`` with its output kept from the harness's own."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return function(*args)


def compare_flags(base: Path, cache: Path) -> list[str]:
    """The ``evaluate.compare`` command line of the ``compare`` unit at ``base``: one row,
    ``tcnlm``, which is there and finished (so it is evaluated and recorded, not trained)."""
    return ["--models", "tcnlm", "--max-epochs", "1", "--runs-dir", str(base / "runs"),
            "--name", "cmp", "--cache-dir", str(cache), "--record-dir",
            str(base / "records"), "--", *TINY[:TINY.index("--epochs")]]


def fresh_flags(runs: Path, cache: Path, name: str = "fresh") -> list[str]:
    """A new tiny TCNLM run of one epoch, evaluated on its test split."""
    return TINY_EPOCH + TCNLM + ["--runs-dir", str(runs), "--cache-dir", str(cache),
                                 "--run-name", name]


def resume_flags(runs: Path, cache: Path, steps: int, name: str = "done") -> list[str]:
    """``--resume`` of a finished run (at ``steps``) for :data:`MORE_STEPS` more steps, into
    a second epoch."""
    return ["--runs-dir", str(runs), "--run-name", name, "--cache-dir", str(cache), "--resume",
            "--epochs", "2", "--max-steps", str(steps + MORE_STEPS)]


class Workspace:
    """The units under ``root/units``, built on first use, and ``good``: what commands give
    on the good units (a case's correct result equals it), kept in ``root/good.json`` so
    that a workspace can be used again (``--workspace``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.units = self.root / "units"
        self._good_file = self.root / "good.json"
        self.good: dict[str, object] = (json.loads(self._good_file.read_text())
                                        if self._good_file.is_file() else {})
        self._builders = {"cache": self._runs, "runs": self._runs, "sdlm": self._sdlm,
                          "reference": self._reference, "exports": self._exports,
                          "compare": self._compare, "corpus": self._corpus,
                          "vectors": self._vectors, "legacy": self._legacy}

    def unit(self, name: str) -> Path:
        """The folder of unit ``name``, built first if needed."""
        if not (self.units / name).exists():
            os.environ["TCNLM_CACHE_DIR"] = str(self.units / "cache")
            self._builders[name]()
            self.good = plain(self.good)
            self._good_file.write_text(json.dumps(self.good))
        return self.units / name

    @property
    def cache(self) -> Path:
        return self.unit("cache")

    def _runs(self) -> None:
        from evaluate import coherence, infer, perplexity, recovery, scalars, topics
        from evaluate.compare import ablation_evaluations
        from train.run import main as train

        runs, cache = self.units / "runs", self.units / "cache"
        done = runs / "done"
        flags = TINY_EPOCH + TCNLM + ["--runs-dir", str(runs), "--cache-dir", str(cache),
                                      "--run-name", "done", "--log-every", "10"]
        quietly(train, flags + ["--max-steps", "2"])
        self.good["steps"] = quietly(train, flags + ["--resume"])["steps"]
        run = ["--run", str(done)]
        self.good["topics"] = quietly(topics.main, run)
        self.good["coherence"] = quietly(coherence.main, run)
        self.good["recovery"] = quietly(recovery.main, run)
        self.good["infer"] = quietly(infer.main, run)
        self.good["scalars"] = quietly(scalars.main, run + ["--tag", "train/loss"])
        self.good["perplexity:done"] = quietly(perplexity.main, run)["perplexity"]
        text = next(cache.glob("synthetic-*")) / "test.txt"
        self.good["perplexity-text:done"] = quietly(
            perplexity.main, run + ["--text-file", str(text)])["perplexity"]
        quietly(ablation_evaluations, done)

    def _sdlm(self) -> None:
        from evaluate.perplexity import main as perplexity
        from train.run import main as train

        runs = self.units / "sdlm"
        quietly(train, TINY + TINY_MODELS["sdlm"] + ["--runs-dir", str(runs), "--cache-dir",
                                                     str(self.cache), "--run-name", "sdlm"])
        self.good["perplexity:sdlm"] = quietly(perplexity, ["--run", str(runs / "sdlm")]
                                               )["perplexity"]

    def _reference(self) -> None:
        """What a new run on the good cache gives (``good["fresh"]``), and its vocabularies."""
        from train.run import main as train

        runs = self.units / "reference"
        self.good["fresh"] = quietly(train, fresh_flags(runs, self.cache))

    def _exports(self) -> None:
        from evaluate.score import main as score
        from tcnlm_tf.data.loading import source_dir
        from tcnlm_tf.runs.loading import load_run
        from train.export import main as export

        done = self.unit("runs") / "done"
        exports = self.units / "exports"
        version = quietly(export, ["--run", str(done), "--output-dir", str(exports)])
        text = exports / "test.txt"
        shutil.copyfile(source_dir(quietly(load_run, done).config.data, self.cache)
                        / "test.txt", text)
        self.good["score"] = quietly(score, ["--saved-model", str(version), "--text-file",
                                             str(text)])

    def _compare(self) -> None:
        from evaluate.compare import main as compare

        base = self.units / "compare"
        shutil.copytree(self.unit("runs") / "done", base / "runs" / "cmp" / "tcnlm",
                        ignore=shutil.ignore_patterns(".lock"))
        self.good["compare"] = quietly(compare, compare_flags(base, self.cache))

    def _corpus(self) -> None:
        from tcnlm_tf.data.loading import source_dir
        from tcnlm_tf.runs.loading import load_run
        from train.prepare import main as prepare

        base = self.units / "corpus"
        base.mkdir(parents=True)
        done = self.unit("runs") / "done"
        source = source_dir(quietly(load_run, done).config.data, self.cache) / "train.txt"
        raw = base / "raw.txt"
        raw.write_text("".join(". ".join(line.split("\t")) + ".\n" for line in
                               source.read_text(encoding="utf-8").splitlines()),
                       encoding="utf-8")
        quietly(prepare, ["--input", str(raw), "--output", str(base / "data" / "mycorpus")])

    def _vectors(self) -> None:
        from train.word2vec import main as word2vec

        base = self.units / "vectors"
        quietly(word2vec, SYNTHETIC + ["--cache-dir", str(self.cache), "--dim", "12",
                                       "--epochs", "1", "--min-count", "1", "--output",
                                       str(base / "vectors.bin")])

    def _legacy(self) -> None:
        from tests.legacy_fixture import unpacked_export

        base = self.units / "legacy"
        shutil.copytree(LEGACY / "runs", base / "runs")
        for name in ("expected.json", "sentences.txt"):
            shutil.copyfile(LEGACY / name, base / name)
        (base / "saved_models" / "tcnlm").mkdir(parents=True)
        unpacked_export(LEGACY / "saved_models" / "tcnlm" / "1",
                        base / "saved_models" / "tcnlm")
