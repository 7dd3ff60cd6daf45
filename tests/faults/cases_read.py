"""Every file a command reads back, damaged before the read: cut short (``truncated``),
overwritten with random bytes (``garbage``), a few bytes inverted as bit rot does
(``damaged``: a file written whole and damaged before the next read), deleted
(``removed``), and in a valid format with the wrong contents (``wrong-contents``).

Each :class:`Target` says where its file is in the case's copies and which commands read it
(:data:`tests.faults.readers.READERS`); :func:`read_cases` crosses them with the damage.
The next normal command of a case that failed runs once the good file is back.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.faults.files import flip, garbage, remove, truncate
from tests.faults.readers import READERS
from tests.faults.scene import Case, Scene, Step


def _number(path: Path) -> int:
    found = re.search(r"-(\d+)", path.name)
    return int(found.group(1)) if found else -1


def in_run(*parts: str) -> Callable[[Scene], Path]:
    """A file of ``done``, the run of the ``runs`` unit."""
    return lambda scene: scene.unit("runs").joinpath("done", *parts)


def newest(folder: str, pattern: str) -> Callable[[Scene], Path]:
    """The newest (highest-numbered) file matching ``pattern`` in a folder of ``done``."""
    def locate(scene: Scene) -> Path:
        return max((scene.unit("runs") / "done" / folder).glob(pattern), key=_number)
    return locate


def prepared(name: str) -> Callable[[Scene], Path]:
    """A file of the prepared corpus in the case's cache."""
    return lambda scene: next((scene.cache / "prepared").iterdir()) / name


def synthetic(name: str) -> Callable[[Scene], Path]:
    """A file of the synthetic corpus the cache was prepared from."""
    return lambda scene: next(scene.cache.glob("synthetic-*")) / name


def events(scene: Scene) -> Path:
    """The TensorBoard event file of ``done`` that holds most of its ``train/loss`` values
    (what ``evaluate.scalars --tag train/loss`` reads)."""
    return max((scene.unit("runs") / "done" / "tensorboard").glob("events.out.tfevents.*"),
               key=lambda p: p.read_bytes().count(b"train/loss"))


def in_unit(unit: str, *parts: str) -> Callable[[Scene], Path]:
    return lambda scene: scene.unit(unit).joinpath(*parts)


@dataclass(frozen=True)
class Target:
    name: str                          #: as the report names it
    locate: Callable[[Scene], Path]    #: the file in a case's copies
    readers: tuple[str, ...]           #: what reads it: truncated and garbage try each
    removed: tuple[str, ...] = ()      #: what reads it when it is deleted
    rots: bool = True                  #: whether bit rot applies (``damaged``, first reader)
    cut: bool = True                   #: whether cutting it short applies


RESUME, PERPLEXITY, FRESH = "train.run --resume", "evaluate.perplexity", "train.run"
TARGETS = (
    Target("run/config.json", in_run("config.json"),
           (PERPLEXITY, RESUME, "train.status", "train.export", "evaluate.record"),
           (PERPLEXITY, RESUME, "train.status")),
    Target("run/lm_vocab.txt", in_run("lm_vocab.txt"),
           (PERPLEXITY, "evaluate.perplexity --text-file", RESUME), (PERPLEXITY, RESUME)),
    Target("run/topic_vocab.txt", in_run("topic_vocab.txt"), (PERPLEXITY, RESUME)),
    Target("run/vocab_digests.json", in_run("vocab_digests.json"), (PERPLEXITY, RESUME),
           (PERPLEXITY,)),
    Target("run/checkpoints/checkpoint", in_run("checkpoints", "checkpoint"), (RESUME,),
           (RESUME,)),
    Target("run/checkpoints/ckpt-N.index", newest("checkpoints", "ckpt-*.index"), (RESUME,)),
    Target("run/checkpoints/ckpt-N.data", newest("checkpoints", "ckpt-*.data-*"), (RESUME,)),
    Target("run/checkpoints/resume-state-N.npz", newest("checkpoints", "resume-state-*.npz"),
           (RESUME,), (RESUME,)),
    Target("run/best/checkpoint", in_run("best", "checkpoint"), (PERPLEXITY,)),
    Target("run/best/ckpt-N.index", newest("best", "ckpt-*.index"),
           (PERPLEXITY, "train.export")),
    Target("run/best/ckpt-N.data", newest("best", "ckpt-*.data-*"),
           (PERPLEXITY, "train.export")),
    Target("run/best", in_run("best"), (), (PERPLEXITY,), rots=False),
    Target("run/metrics.json", in_run("metrics.json"),
           (RESUME, "train.status", "evaluate.scalars", "evaluate.curve", "evaluate.record"),
           (RESUME, "evaluate.curve")),
    Target("run/tensorboard/events", events, ("evaluate.scalars",)),
    Target("run/tensorboard", in_run("tensorboard"), (), ("evaluate.scalars",), rots=False),
    Target("run/ablations.json", in_run("ablations.json"), ("evaluate.record",)),
    Target("run/.lock", in_run(".lock"), (RESUME,), rots=False, cut=False),
    Target("sdlm/knowledge_base.npz", in_unit("sdlm", "sdlm", "knowledge_base.npz"),
           ("evaluate.perplexity (sdlm)",), ("evaluate.perplexity (sdlm)",)),
    Target("cache/manifest.json", prepared("manifest.json"), (FRESH,), (FRESH,)),
    Target("cache/train-00000.h5", prepared("train-00000.h5"), (FRESH,), (FRESH,)),
    Target("cache/train-counts.npy", prepared("train-counts.npy"), (FRESH,), (FRESH,)),
    Target("cache/lm_vocab.txt", prepared("lm_vocab.txt"), (FRESH,), (FRESH,)),
    Target("cache/topic_vocab.txt", prepared("topic_vocab.txt"), (FRESH,)),
    Target("cache/synthetic/train.txt", synthetic("train.txt"), (FRESH,)),
    Target("cache/synthetic/truth.npz", synthetic("truth.npz"), ("evaluate.recovery", FRESH),
           ("evaluate.recovery",)),
    Target("export/saved_model.pb", in_unit("exports", "done", "1", "saved_model.pb"),
           ("evaluate.score",)),
    Target("export/variables.data",
           in_unit("exports", "done", "1", "variables", "variables.data-00000-of-00001"),
           ("evaluate.score",)),
    Target("export/variables.index", in_unit("exports", "done", "1", "variables",
                                             "variables.index"), ("evaluate.score",)),
    Target("export/variables", in_unit("exports", "done", "1", "variables"), (),
           ("evaluate.score",), rots=False),
    Target("comparison/compare.json", in_unit("compare", "runs", "cmp", "compare.json"),
           ("evaluate.compare",)),
    Target("records/compare.json", in_unit("compare", "records", "compare.json"),
           ("evaluate.compare", "evaluate.topic_counts"), ("evaluate.compare",)),
    Target("records/tcnlm/metrics.json",
           in_unit("compare", "records", "tcnlm", "metrics.json"),
           ("evaluate.compare", "evaluate.topic_counts"), ("evaluate.compare",)),
    Target("corpus/valid.txt", in_unit("corpus", "data", "mycorpus", "valid.txt"),
           ("train.run --dataset",), rots=False, cut=False),
    Target("vectors/vectors.bin", in_unit("vectors", "vectors.bin"),
           ("train.run --embeddings",), ("train.run --embeddings",), rots=False),
)

#: the damage of each generic kind, and what the report says it is
DAMAGE = {"truncated": (truncate, "cut to half its size"),
          "garbage": (garbage, "every byte replaced by a random one"),
          "damaged": (flip, "16 bytes in the middle inverted (bit rot before the next read)"),
          "removed": (remove, "deleted before the read")}


def damaged_read(kind: str, target: Target, reader: str, known: str = "") -> Case:
    """The case of ``target`` damaged as ``kind`` says, then read by ``reader``."""
    damage, fault = DAMAGE[kind]

    def setup(scene: Scene) -> Step:
        path = target.locate(scene)
        damage(path)
        step = READERS[reader](scene, path)
        step.lift = scene.restore(path)
        return step

    return Case(kind, target.name, reader, fault, setup, known=known)


def read_cases() -> list[Case]:
    """Every target with each damage and each of its readers."""
    cases = []
    for target in TARGETS:
        if target.cut:
            cases += [damaged_read("truncated", target, reader) for reader in target.readers]
        cases += [damaged_read("garbage", target, reader) for reader in target.readers]
        if target.rots and target.readers:
            cases.append(damaged_read("damaged", target, target.readers[0]))
        cases += [damaged_read("removed", target, reader) for reader in target.removed]
    return cases


# ------------------------------------------------------------- valid, wrong contents
def edit_json(path: Path, change: Callable[[object], object]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text())), indent=2) + "\n")


def swap_lines(path: Path, first: int = 10, second: int = 11) -> None:
    """Swap two lines: the file stays a valid list of unique words, in another order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[first], lines[second] = lines[second], lines[first]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def reseal(shard: Path) -> None:
    """Write the SHA-256 of an edited cache file into its manifest, as if it had been
    prepared so: a valid, self-consistent cache with wrong contents."""
    from tcnlm_tf.data.shards import file_digest

    manifest = shard.parent / "manifest.json"
    data = json.loads(manifest.read_text())
    for entry in data["splits"].values():
        for item in entry["shards"] + [entry.get("lm_counts") or {}]:
            if item.get("file") == shard.name:
                item["sha256"] = file_digest(shard)
    manifest.write_text(json.dumps(data, indent=1, sort_keys=True))


def _shard_ids(scene: Scene) -> Path:
    import h5py
    shard = prepared("train-00000.h5")(scene)
    with h5py.File(shard, "r+") as h5:
        h5["lm_ids"][5] = 60000
    reseal(shard)
    return shard


def _shard_offsets(scene: Scene) -> Path:
    import h5py
    shard = prepared("train-00000.h5")(scene)
    with h5py.File(shard, "r+") as h5:
        offsets = h5["sent_offsets"][()]
        h5["sent_offsets"][3], h5["sent_offsets"][4] = offsets[4], offsets[3]
    reseal(shard)
    return shard


def _counts(scene: Scene) -> Path:
    import numpy as np
    path = prepared("train-counts.npy")(scene)
    counts = np.load(path)
    first, second = np.argsort(-counts)[:2]
    counts[first] += 5
    counts[second] -= 5
    np.save(path, counts)
    reseal(path)
    return path


def _resume_state_shapes(scene: Scene) -> Path:
    import numpy as np
    path = newest("checkpoints", "resume-state-*.npz")(scene)
    with np.load(path) as saved:
        arrays = {name: saved[name] for name in saved.files}
    for name in arrays:
        if name.startswith("seed_"):
            arrays[name] = np.zeros(7, np.float64)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def _other_checkpoint(folder: str) -> Callable[[Scene], Path]:
    """The newest checkpoint of ``done``'s ``folder`` replaced by the SDLM run's newest."""
    def damage(scene: Scene) -> Path:
        index = newest(folder, "ckpt-*.index")(scene)
        other = max((scene.unit("sdlm") / "sdlm" / "checkpoints").glob("ckpt-*.index"),
                    key=_number)
        index.write_bytes(other.read_bytes())
        [data] = index.parent.glob(index.stem + ".data-*")
        [theirs] = other.parent.glob(other.stem + ".data-*")
        data.write_bytes(theirs.read_bytes())
        return index
    return damage


def _state_elsewhere(scene: Scene) -> Path:
    path = in_run("checkpoints", "checkpoint")(scene)
    path.write_text('model_checkpoint_path: "ckpt-999"\n'
                    'all_model_checkpoint_paths: "ckpt-999"\n')
    return path


def _changed(locate: Callable[[Scene], Path], change: Callable[[Path], None]
             ) -> Callable[[Scene], Path]:
    def damage(scene: Scene) -> Path:
        path = locate(scene)
        change(path)
        return path
    return damage


def _vectors_dim(path: Path) -> None:
    import numpy as np

    from tcnlm_tf.data.embeddings import write_vectors
    write_vectors(path, ["the", "a"], np.ones((2, 8), np.float32))


def _hidden_size(config: dict) -> dict:
    config["model"]["hidden_size"] *= 2
    return config


def _other_model(config: dict) -> dict:
    config["model"]["model"] = "lstm"
    return config


WRONG = [
    # (target, readers, variant, fault, damage, known)
    ("run/config.json", (PERPLEXITY, RESUME), "hidden-size", "hidden_size doubled",
     _changed(in_run("config.json"), lambda p: edit_json(p, _hidden_size)), ""),
    ("run/config.json", (PERPLEXITY,), "other-model", "another model named (lstm)",
     _changed(in_run("config.json"), lambda p: edit_json(p, _other_model)), ""),
    ("run/lm_vocab.txt", (PERPLEXITY, "evaluate.perplexity --text-file", RESUME), "swapped",
     "two words swapped",
     _changed(in_run("lm_vocab.txt"), swap_lines), ""),
    ("run/topic_vocab.txt", ("evaluate.topics", "evaluate.perplexity --text-file", RESUME),
     "swapped", "two words swapped",
     _changed(in_run("topic_vocab.txt"), swap_lines), ""),
    ("run/checkpoints/checkpoint", (RESUME,), "missing-checkpoint",
     "names a checkpoint that is not there",
     _state_elsewhere, ""),
    ("run/checkpoints/ckpt-N", (RESUME,), "other-model",
     "the newest is another model's checkpoint",
     _other_checkpoint("checkpoints"), ""),
    ("run/best/ckpt-N", (PERPLEXITY,), "other-model", "another model's checkpoint",
     _other_checkpoint("best"), ""),
    ("run/checkpoints/resume-state-N.npz", (RESUME,), "shapes",
     "random-stream states of another shape",
     _resume_state_shapes, ""),
    ("run/metrics.json", (RESUME, "train.status", "evaluate.scalars"), "list",
     "a JSON list instead of an object",
     _changed(in_run("metrics.json"), lambda p: p.write_text("[]\n")), ""),
    ("run/ablations.json", ("evaluate.record",), "list", "a JSON list instead of an object",
     _changed(in_run("ablations.json"), lambda p: p.write_text("[]\n")), ""),
    ("run/.lock", (RESUME,), "other-holder", "another host and process in it",
     _changed(in_run(".lock"), lambda p: p.write_text("elsewhere 1\n")), ""),
    ("cache/manifest.json", (FRESH,), "word-count", "a shard's word count off by one",
     _changed(prepared("manifest.json"), lambda p: edit_json(
         p, lambda m: {**m, "splits": {**m["splits"], "train": {
             **m["splits"]["train"], "words": m["splits"]["train"]["words"] + 1}}})), ""),
    ("cache/train-00000.h5", (FRESH,), "id-out-of-range",
     "a word id past the vocabulary, checksum renewed",
     _shard_ids, "shard contents (ids out of range)"),
    ("cache/train-00000.h5", (FRESH,), "offsets",
     "sentence offsets out of order, checksum renewed",
     _shard_offsets, "shard contents (offsets)"),
    ("cache/train-counts.npy", (FRESH,), "moved",
     "two counts moved, same total, checksum renewed",
     _counts, "shard contents (counts)"),
    ("cache/lm_vocab.txt", (FRESH,), "short", "its last word dropped",
     _changed(prepared("lm_vocab.txt"), lambda p: p.write_text(
         "\n".join(p.read_text().splitlines()[:-1]) + "\n")), ""),
    ("cache/topic_vocab.txt", (FRESH,), "swapped", "two words swapped",
     _changed(prepared("topic_vocab.txt"), swap_lines), ""),
    ("cache/synthetic/train.txt", (FRESH,), "short", "its last document dropped",
     _changed(synthetic("train.txt"), lambda p: p.write_text(
         "\n".join(p.read_text().splitlines()[:-1]) + "\n")), ""),
    ("records/compare.json", ("evaluate.compare",), "other-seed",
     "another seed (another comparison)",
     _changed(in_unit("compare", "records", "compare.json"),
              lambda p: edit_json(p, lambda s: {**s, "seed": 1})), ""),
    ("records/tcnlm/metrics.json", ("evaluate.compare", "evaluate.topic_counts"),
     "string", "test_perplexity a string",
     _changed(in_unit("compare", "records", "tcnlm", "metrics.json"),
              lambda p: edit_json(p, lambda m: {**m, "test_perplexity": "low"})), ""),
    ("vectors/vectors.bin", ("train.run --embeddings",), "size",
     "vectors of another size (8)",
     _changed(in_unit("vectors", "vectors.bin"), _vectors_dim), ""),
    ("corpus/valid.txt", ("train.run --dataset",), "blank", "blank lines only",
     _changed(in_unit("corpus", "data", "mycorpus", "valid.txt"),
              lambda p: p.write_text("\n\n\n")), ""),
]


def wrong_case(target: str, reader: str, variant: str, fault: str,
               damage: Callable[[Scene], Path], known: str) -> Case:
    def setup(scene: Scene) -> Step:
        path = damage(scene)
        step = READERS[reader](scene, path)
        halves = list(path.parent.glob(path.stem + ".data-*")) if path.suffix == ".index" else []
        step.lift = scene.restore(path, *halves)
        return step

    return Case("wrong-contents", target, reader, fault, setup, variant, known)


def wrong_cases() -> list[Case]:
    return [wrong_case(target, reader, variant, fault, damage, known)
            for target, readers, variant, fault, damage, known in WRONG for reader in readers]
