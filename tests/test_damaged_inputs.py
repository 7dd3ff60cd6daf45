"""Damaged inputs that a command reads back: a run's vocabulary file, a resume state, an
export, the run lock on a full disk, a knowledge base, a cached synthetic corpus and a
corpus's training text of random bytes. Each ends as one line naming the file and what to
do, or is passed over or generated again with a notice, never a traceback or a training on
damaged text."""
import errno
import shutil
import struct
import types
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.data import knowledge
from tcnlm_tf.data import synthetic as syn
from tcnlm_tf.data.vocab import Vocabulary
from tcnlm_tf.errors import UserError
from tcnlm_tf.runs import lock as lock_module
from tcnlm_tf.runs.directory import RunDirectory
from tcnlm_tf.serving.api import load_export
from tests.conftest import TINY, run_flags
from tests.test_cli import assert_one_line_error, run
from train.run import _check_vocabularies, main
from train.trainer import Trainer

SMALL = syn.SyntheticConfig(num_topics=3, content_vocab_size=30, train_docs=12, valid_docs=3,
                            test_docs=3, min_sentences=2, max_sentences=4)


def flip_compressed_bytes(path):
    """Invert the first bytes of the deflated data of the largest member of the zip
    ``path``, as bit rot does: its decompression then fails."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = max(archive.infolist(), key=lambda member: member.compress_size)
    name_length, extra_length = struct.unpack("<HH", raw[info.header_offset + 26:
                                                          info.header_offset + 30])
    start = info.header_offset + 30 + name_length + extra_length
    for i in range(start, start + 8):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


# ------------------------------------------------------------------ run vocabularies

@pytest.mark.parametrize("name", ["lm_vocab.txt", "topic_vocab.txt"])
def test_resume_with_a_vocabulary_that_is_not_utf8_is_one_error(tmp_path, name):
    words = ["<pad>", "<unk>", "<eos>", "alpha", "beta"]
    corpus = types.SimpleNamespace(lm_vocab=Vocabulary(words), topic_vocab=Vocabulary(words))
    for vocab_file in ("lm_vocab.txt", "topic_vocab.txt"):
        (tmp_path / vocab_file).write_text("\n".join(words) + "\n", encoding="utf-8")
    (tmp_path / name).write_bytes(b"\x9e\xff\x00garbage\n")
    with pytest.raises(UserError, match="not UTF-8") as error:
        _check_vocabularies(tmp_path, corpus)
    assert str(tmp_path / name) in str(error.value)


# ------------------------------------------------------------------ resume state

def fake_trainer(tmp_path, arrays):
    """What :meth:`Trainer._read_resume_state` reads: the run's files, the step and the
    model's random-stream states (two int64 [3, 2] variables), with ``arrays`` saved as
    the resume state of step 4."""
    files = RunDirectory(tmp_path)
    files.checkpoints.mkdir(parents=True)
    np.savez(files.resume_state(4), **arrays)
    seeds = [tf.Variable(np.zeros((3, 2), np.int64)) for _ in range(2)]
    return types.SimpleNamespace(run_files=files, step=4, _seed_states=seeds)


@pytest.mark.parametrize("bad", [np.zeros((5, 2), np.int64), np.zeros((3, 2), np.float32)])
def test_a_resume_state_of_another_shape_or_dtype_is_damaged(tmp_path, bad):
    """Read as damaged (a ValueError naming the file, which ``restore_newest_readable``
    passes over for the next older checkpoint), not a ValueError on assignment later."""
    trainer = fake_trainer(tmp_path, {"seed_0": np.zeros((3, 2), np.int64), "seed_1": bad})
    with pytest.raises(ValueError, match="resume-state-4.npz is damaged.*seed_1"):
        Trainer._read_resume_state(trainer)


def test_a_resume_state_of_the_model_is_read(tmp_path):
    good = {f"seed_{i}": np.full((3, 2), i, np.int64) for i in range(2)}
    arrays = Trainer._read_resume_state(fake_trainer(tmp_path, good))
    assert sorted(arrays) == ["seed_0", "seed_1"]
    np.testing.assert_array_equal(arrays["seed_1"], good["seed_1"])


@pytest.mark.slow
def test_resume_passes_over_a_resume_state_of_another_shape(tmp_path, capsys):
    """A run resumed from ckpt-2 when ckpt-4's random-stream states have another shape."""
    flags = TINY + run_flags(tmp_path, "run")
    main(flags + ["--max-steps", "2"])
    main(flags + ["--max-steps", "4", "--resume"])
    state = tmp_path / "runs" / "run" / "checkpoints" / "resume-state-4.npz"
    with np.load(state) as saved:
        arrays = {name: saved[name] for name in saved.files}
    seeds = [name for name in arrays if name.startswith("seed_")]
    assert seeds
    arrays[seeds[0]] = np.zeros(arrays[seeds[0]].shape + (2,), arrays[seeds[0]].dtype)
    np.savez(state, **arrays)
    capsys.readouterr()
    metrics = main(flags + ["--max-steps", "5", "--resume"])
    out = capsys.readouterr().out
    assert "skipped unreadable checkpoint(s) ckpt-4" in out and "resume-state-4.npz" in out
    assert "restored ckpt-2" in out and metrics["steps"] == 5


# ------------------------------------------------------------------ exports

@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A small SavedModel (one variable, one function): its directory."""
    directory = tmp_path_factory.mktemp("export") / "1"
    module = tf.Module()
    module.weights = tf.Variable(np.arange(4096, dtype=np.float32))
    module.total = tf.function(lambda: tf.reduce_sum(module.weights), input_signature=[])
    tf.saved_model.save(module, str(directory))
    return directory


def truncate(path):
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def rot(path):
    raw = bytearray(path.read_bytes())
    middle = len(raw) // 2
    raw[middle:middle + 32] = bytes(255 - b for b in raw[middle:middle + 32])
    path.write_bytes(bytes(raw))


def garbage(path):
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


@pytest.mark.parametrize("target,damage,named", [
    ("saved_model.pb", truncate, True), ("saved_model.pb", garbage, True),
    ("saved_model.pb", rot, False),      # rotted bytes may still parse as a SavedModel
    ("variables/variables.data-00000-of-00001", truncate, True),
    ("variables/variables.data-00000-of-00001", garbage, True),
    ("variables/variables.data-00000-of-00001", rot, True),
    ("variables/variables.index", truncate, True),
    ("variables/variables.index", garbage, True), ("variables/variables.index", rot, True),
    ("variables", None, True),
])
def test_a_damaged_export_is_one_error(saved_model, tmp_path, target, damage, named):
    """One line naming the export and, where it can be told, the file that does not read
    back (TensorFlow's own error names neither)."""
    export = tmp_path / "1"
    shutil.copytree(saved_model, export)
    if damage is None:
        shutil.rmtree(export / target)
    else:
        damage(export / target)
    with pytest.raises(UserError, match="python -m train.export") as error:
        load_export(export)
    message = str(error.value)
    assert "\n" not in message and str(export) in message and "damaged" in message
    if named:
        assert f"{export / target}" in message and "does not read back" in message, message


# ------------------------------------------------------------------ run lock

class FullDisk:
    """A text file whose flush fails as a full disk's does (no file name in the error)."""

    def __init__(self, handle):
        self._handle = handle

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self):
        """As a buffered file's: flush (which fails), and close all the same."""
        try:
            self.flush()
        finally:
            self._handle.close()


def test_a_full_disk_while_locking_names_the_lock_file(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_module, "open", lambda *a, **k: FullDisk(open(*a, **k)),
                        raising=False)
    with pytest.raises(OSError) as error:
        lock_module.try_lock(tmp_path)
    assert error.value.errno == errno.ENOSPC
    assert error.value.filename == str(tmp_path / ".lock")
    monkeypatch.undo()
    lock = lock_module.try_lock(tmp_path)       # the failed attempt left it free
    assert lock is not None
    lock.release()


# ------------------------------------------------------------------ knowledge base

def test_a_knowledge_base_with_bit_rot_is_one_error(tmp_path):
    n = 400
    kb = knowledge.KnowledgeBase(
        words=[f"w{i}" for i in range(n)], sense_word=np.arange(n, dtype=np.int32),
        edge_sense=np.arange(n, dtype=np.int32), edge_sememe=np.arange(n, dtype=np.int32),
        sememes=[f"s{i}" for i in range(n)], private=np.zeros(n, bool), source="synthetic")
    path = tmp_path / "knowledge_base.npz"
    knowledge.save(kb, path)
    flip_compressed_bytes(path)
    with pytest.raises(UserError, match="not a valid knowledge base.*delete it") as error:
        knowledge.load(path)
    assert str(path) in str(error.value)


# ------------------------------------------------------------------ synthetic corpus

def drop_a_document(path):
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))


@pytest.mark.parametrize("damage", [truncate, rot, drop_a_document])
def test_a_damaged_synthetic_corpus_text_is_generated_again(tmp_path, damage):
    directory = syn.write_corpus(tmp_path / "synthetic", SMALL)
    written = {p.name: p.read_bytes() for p in directory.glob("*.txt")}
    damage(directory / "train.txt")
    notices = []
    syn.write_corpus(directory, SMALL, log=notices.append)
    assert len(notices) == 1 and "train.txt" in notices[0] and str(directory) in notices[0]
    assert {p.name: p.read_bytes() for p in directory.glob("*.txt")} == written
    syn.write_corpus(directory, SMALL, log=notices.append)  # whole again: reused silently
    assert len(notices) == 1


def test_a_synthetic_truth_with_bit_rot(tmp_path):
    """``load_truth`` says which file and what to do; ``write_corpus`` (which every
    command reading the corpus goes through) generates it again, with a notice."""
    directory = syn.write_corpus(tmp_path / "synthetic", SMALL)
    truth = syn.load_truth(directory)
    flip_compressed_bytes(directory / syn.TRUTH_FILE)
    with pytest.raises(UserError, match="truth.npz is damaged.*delete it") as error:
        syn.load_truth(directory)
    assert str(directory / syn.TRUTH_FILE) in str(error.value)
    notices = []
    syn.write_corpus(directory, SMALL, log=notices.append)
    assert len(notices) == 1 and "truth.npz" in notices[0]
    np.testing.assert_array_equal(syn.load_truth(directory).topic_word, truth.topic_word)


# ------------------------------------------------------------------ a corpus's own text

def test_a_training_split_of_random_bytes_names_the_file(tmp_path):
    """Random bytes read as a few short lines (the rest skipped as not text), too few words
    for a vocabulary: the one line says which file it read and what it skipped."""
    corpus = tmp_path / "data" / "mycorpus"
    corpus.mkdir(parents=True)
    garbage_file = corpus / "train.txt"
    garbage_file.write_bytes(np.random.default_rng(0).bytes(20000))
    for split in ("valid", "test"):
        (corpus / f"{split}.txt").write_text("the cat sat\tthe dog ran\n" * 3)
    result = run("--dataset", "mycorpus", "--data-dir", str(tmp_path / "data"),
                 *run_flags(tmp_path, "garbage"))
    assert_one_line_error(result, str(garbage_file), "lines skipped as not text",
                          "no word occurs at least 10 times")


@pytest.mark.parametrize("text, said", [
    ('{"format": "tcnlm_tf.preset", "format_ver', "as JSON"),
    ('["tcnlm_tf.preset"]', "holds no JSON object"),
    ('{"format": "tcnlm_tf.preset", "format_version": "1"}', "format_version is '1'"),
])
def test_a_preset_with_damaged_metadata_is_one_error(tmp_path, text, said):
    """A preset's metadata.json truncated, of another JSON type or with a format version
    that is no number is one line naming the file (not a traceback from json or from the
    version comparison)."""
    from tcnlm_tf.serving.preset import load_preset

    (tmp_path / "metadata.json").write_text(text)
    with pytest.raises(UserError) as raised:
        load_preset(tmp_path)
    message = str(raised.value)
    assert "\n" not in message and str(tmp_path / "metadata.json") in message
    assert said in message and "train.preset" in message


def test_a_run_configuration_that_cannot_be_read_is_one_error(tmp_path, monkeypatch):
    """config.json that exists but cannot be read (permissions, an I/O error) is one line
    naming it, not an OSError traceback."""
    from pathlib import Path

    from tcnlm_tf.config import RunConfig

    path = tmp_path / "config.json"
    path.write_text("{}")

    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refused)
    with pytest.raises(UserError) as raised:
        RunConfig.load(path)
    assert str(raised.value) == (f"cannot read {path} (Permission denied): check its "
                                 "permissions, or restore it from a copy")
