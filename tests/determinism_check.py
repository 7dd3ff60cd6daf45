"""``python -m tests.determinism_check OUT MODEL...``: train each named tiny model of
``tests.conftest.TINY_MODELS`` for one epoch in this process and write, per model, its test
perplexity, per-document test scores and a digest of every variable of its best and its last
training checkpoint to the JSON file OUT (the determinism test runs this in processes with
different thread counts and compares what they write)."""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.conftest import TINY_EPOCH, TINY_MODELS

#: a smaller corpus than TINY's, so that every model's epoch is short
FLAGS = TINY_EPOCH + ["--synthetic", "train_docs=20"]


def digest(directory: Path) -> str:
    """SHA-256 of every variable (name and bytes) of the newest checkpoint in ``directory``,
    but its save counter (how many saves, not what was learnt) and its object graph (a
    description whose order follows Python's per-process string hashing)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(directory)))
    sha = hashlib.sha256()
    for name in sorted(reader.get_variable_to_shape_map()):
        if "save_counter" in name or name == "_CHECKPOINTABLE_OBJECT_GRAPH":
            continue
        sha.update(name.encode())
        sha.update(np.ascontiguousarray(reader.get_tensor(name)).tobytes())
    return sha.hexdigest()


def main(out: str, models: list[str]) -> None:
    from tcnlm_tf.runs.directory import RunDirectory
    from train.run import main as train

    found = {}
    with tempfile.TemporaryDirectory() as work:
        for name in models:
            metrics = train(FLAGS + TINY_MODELS[name] + [
                "--runs-dir", f"{work}/runs", "--cache-dir", f"{work}/cache", "--run-name", name])
            files = RunDirectory(Path(work) / "runs" / name)
            found[name] = {"test_perplexity": metrics["test_perplexity"],
                           "test_documents": metrics["test_documents"],
                           "best": digest(files.best), "last": digest(files.checkpoints)}
    Path(out).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
