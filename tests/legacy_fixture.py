"""``python -m tests.legacy_fixture OUT``: tiny runs and one export made by this version of
the code, with what they must keep giving, for ``tests/test_legacy_runs.py`` to check
against every later version (a change of the code must not change what an earlier
checkpoint or SavedModel resumes to, evaluates to or serves).

For every tiny model of :data:`LEGACY_MODELS` (every model in each mode, TCNLM with the
causal context, the LSTM with each decoder) it writes

- ``runs/<name>/``: the run after 3 steps (config, vocabularies, checkpoints with their
  resume state; no TensorBoard events);
- ``resumed/<name>.npz``: every model weight after resuming that run to step 5;
- in ``expected.json``: the test perplexity ``evaluate.perplexity`` gives the 3-step run,
  and the ``score`` signature's log-likelihoods of :data:`SENTENCES` in an export of it;

and ``saved_models/tcnlm/1/``, the export of the TCNLM run (its 2.6 MB graph
``saved_model.pb`` stored gzipped, 0.3 MB: no file of the repository exceeds 1 MiB;
:func:`unpacked_export` restores it), with the result of ``evaluate.score`` on
``sentences.txt`` through it. The commit that made it all, and the
machine (:func:`machine`), are in ``expected.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.conftest import REPO_ROOT, TINY_EPOCH, TINY_MODELS

#: the runs kept: every model in every mode, TCNLM's causal context, the LSTM's decoders
#: (``lstm-tied`` was made by code whose tied softmax lived outside ``layers/``, so its
#: weights must load whatever module defines the layer)
LEGACY_MODELS = {**TINY_MODELS,
                 "tcnlm-preceding": TINY_MODELS["tcnlm"] + ["--context", "preceding"],
                 "lstm-adaptive": TINY_MODELS["lstm"] + ["--decoder", "adaptive",
                                                         "--cutoffs", "40"],
                 "lstm-mos": TINY_MODELS["lstm"] + ["--decoder", "mos", "--mixtures", "3"],
                 "lstm-tied": TINY_MODELS["lstm"] + ["--decoder", "softmax",
                                                     "--tie-embeddings"]}
#: scored through each export (with an empty document: the models read context from it)
SENTENCES = ["the party won the vote", "qqqzz unknown words here", ""]
#: steps of the kept runs, and of the resumed runs whose weights are recorded
STEPS, RESUMED_STEPS = 3, 5


#: the CPU features that choose TensorFlow's (oneDNN's) float32 kernels
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")


def machine() -> str:
    """The CPU model, its kernel-choosing features and the TensorFlow version: on another
    machine the same computation may round differently in the last bits."""
    import tensorflow as tf
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    return (f"{model}; {' '.join(f for f in KERNEL_FLAGS if f in flags)}; "
            f"tensorflow {tf.__version__}")


def model_weights(run_dir: Path) -> dict[str, np.ndarray]:
    """Every model weight in the run's newest checkpoint, by checkpoint key."""
    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(run_dir / "checkpoints"))
    return {key: reader.get_tensor(key) for key in sorted(reader.get_variable_to_shape_map())
            if key.startswith("model/")}


def train_flags(name: str, runs: Path, cache: Path, steps: int) -> list[str]:
    return TINY_EPOCH + LEGACY_MODELS[name] + [
        "--max-steps", str(steps), "--runs-dir", str(runs), "--run-name", name,
        "--cache-dir", str(cache)]


def resumed_weights(run_dir: Path, name: str, cache: Path) -> dict[str, np.ndarray]:
    """The model weights of a copy of ``run_dir`` resumed to :data:`RESUMED_STEPS`."""
    from train.run import main as train
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(run_dir, Path(tmp) / name)
        with contextlib.redirect_stdout(io.StringIO()):
            train(train_flags(name, Path(tmp), cache, RESUMED_STEPS) + ["--resume"])
        return model_weights(Path(tmp) / name)


def scores(export: Path) -> list[float]:
    """The ``score`` signature's total log-likelihood of each of :data:`SENTENCES`."""
    import tensorflow as tf
    signature = tf.saved_model.load(str(export)).signatures["score"]
    result = signature(sentences=tf.constant(SENTENCES),
                       documents=tf.constant([""] * len(SENTENCES)))
    return [float(v) for v in result["log_likelihood"].numpy()]


def unpacked_export(kept: Path, where: Path) -> Path:
    """A loadable copy, under ``where``, of the kept export ``kept`` (graph gzipped)."""
    copy = where / kept.name
    shutil.copytree(kept, copy)
    packed = copy / "saved_model.pb.gz"
    (copy / "saved_model.pb").write_bytes(gzip.decompress(packed.read_bytes()))
    packed.unlink()
    return copy


def score_file(export: Path, text_file: Path) -> dict:
    """``evaluate.score``'s result for ``text_file`` through ``export``."""
    from evaluate.score import main as score
    with contextlib.redirect_stdout(io.StringIO()):
        return score(["--saved-model", str(export), "--text-file", str(text_file)])


def evaluated_perplexity(run_dir: Path) -> float:
    from evaluate.perplexity import main as perplexity
    with contextlib.redirect_stdout(io.StringIO()):
        return perplexity(["--run", str(run_dir)])["perplexity"]


def make(out: Path) -> dict:
    from train.export import main as export
    from train.run import main as train

    cache = out / ".cache"
    expected = {"commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT,
                                         capture_output=True, text=True).stdout.strip(),
                "machine": machine(), "sentences": SENTENCES, "runs": {}}
    text_file = out / "sentences.txt"
    out.mkdir(parents=True)
    text_file.write_text("\t".join(s for s in SENTENCES if s) + "\n", encoding="utf-8")
    (out / "resumed").mkdir()
    for name in LEGACY_MODELS:
        print(f"== {name}", flush=True)
        with contextlib.redirect_stdout(io.StringIO()):
            train(train_flags(name, out / "runs", cache, STEPS))
        run_dir = out / "runs" / name
        shutil.rmtree(run_dir / "tensorboard")
        with tempfile.TemporaryDirectory() as tmp, \
                contextlib.redirect_stdout(io.StringIO()):
            exported = export(["--run", str(run_dir), "--output-dir", tmp])
            np.savez_compressed(out / "resumed" / f"{name}.npz",
                                **resumed_weights(run_dir, name, cache))
            expected["runs"][name] = {"test_perplexity": evaluated_perplexity(run_dir),
                                      "scores": scores(exported)}
            if name == "tcnlm":
                kept = out / "saved_models" / "tcnlm" / "1"
                shutil.copytree(exported, kept)
                graph = kept / "saved_model.pb"
                graph.with_suffix(".pb.gz").write_bytes(gzip.compress(graph.read_bytes(), 9))
                graph.unlink()
                expected["score_file"] = score_file(exported, text_file)
    shutil.rmtree(cache)
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    return expected


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.legacy_fixture", allow_abbrev=False,
                                description=__doc__.split(": ", 1)[1].split("\n\n")[0])
    p.add_argument("out", type=Path, help="directory to write (must not exist)")
    args = p.parse_args(argv)
    if args.out.exists():
        sys.exit(f"error: {args.out} exists; give a new directory")
    make(args.out)


if __name__ == "__main__":
    main()
