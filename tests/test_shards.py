"""The prepared corpus on disk (tcnlm_tf.data.shards): shards that read back as the text,
a damaged, truncated or foreign shard named in one line and prepared again, and a
preparation killed with SIGKILL that leaves nothing looking complete."""
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tcnlm_tf.config import DataConfig
from tcnlm_tf.data import shard_checks, sharded_array, shards
from tcnlm_tf.data.corpus import write_corpus_file
from tcnlm_tf.data.loading import load_corpus, open_prepared
from tcnlm_tf.data.sharded_array import ShardedArray
from tcnlm_tf.metrics.baselines import target_counts
from tests.conftest import REPO_ROOT


def write_corpus(root, documents=40, seed=0):
    rng = np.random.default_rng(seed)
    for split in ("train", "valid", "test"):
        write_corpus_file(root / "mine" / f"{split}.txt", (
            [[f"w{rng.integers(40)}" for _ in range(rng.integers(1, 9))]
             for _ in range(rng.integers(1, 4))] for _ in range(documents)))


def config(root, **settings):
    return DataConfig(dataset="mine", data_dir=str(root), min_freq=1, topic_min_docs=1,
                      **settings)


def arrays(corpus):
    return {split: {field: np.asarray(value) for field, value in vars(arrays).items()}
            for split, arrays in corpus.splits.items()}


def assert_same(a, b):
    for split in a:
        for field in a[split]:
            np.testing.assert_array_equal(a[split][field], b[split][field],
                                          err_msg=f"{split}.{field}")


def flip_byte(path, at):
    """Invert one byte of a file (a damage its checksum catches)."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def refused_then_prepared_again(corpus, damaged, tmp_path):
    """Opening the damaged prepared corpus is one line naming the ``damaged`` file; the
    CorruptShard's message. Then load_corpus prepares it again; its logs and arrays."""
    key = json.loads((corpus.cache_path / "manifest.json").read_text())["key"]
    with pytest.raises(shard_checks.CorruptShard) as error:
        open_prepared(corpus.cache_path, "mine", corpus.source_dir, key)
    message = str(error.value)
    assert str(damaged) in message and "\n" not in message and "prepare the corpus" in message
    logs = []
    again = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                        log=logs.append, shard_words=30)
    return logs, arrays(again)


@pytest.fixture()
def prepared(tmp_path):
    write_corpus(tmp_path / "data")
    logs = []
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=logs.append, shard_words=30)
    return tmp_path, corpus, logs


def test_shards_hold_whole_documents_of_the_words_asked_for(prepared):
    _, corpus, _ = prepared
    manifest = json.loads((corpus.cache_path / "manifest.json").read_text())
    for split, entry in manifest["splits"].items():
        sizes = [shard["words"] for shard in entry["shards"]]
        assert len(sizes) > 2 and all(size >= 30 for size in sizes[:-1])
        assert sum(shard["documents"] for shard in entry["shards"]) == 40 == entry["documents"]
        assert corpus.splits[split].lm_ids.dtype == np.uint16
        # the stored counts are those of the ids
        ids = np.asarray(corpus.splits[split].lm_ids)
        np.testing.assert_array_equal(corpus.splits[split].lm_counts, np.bincount(ids))
    assert shard_checks.id_dtype(1 << 16) == np.uint16
    assert shard_checks.id_dtype((1 << 16) + 1) == np.int32


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "foreign", "missing"])
def test_a_damaged_shard_is_named_in_one_line_and_prepared_again(prepared, damage):
    tmp_path, corpus, _ = prepared
    before = arrays(corpus)
    shard = corpus.cache_path / "train-00001.h5"
    if damage == "flipped byte":
        flip_byte(shard, -5)
    elif damage == "truncated":
        shard.write_bytes(shard.read_bytes()[:-100])
    elif damage == "foreign":                    # a shard of another preparation
        write_corpus(tmp_path / "other", seed=1)
        other = load_corpus(config(tmp_path / "other"), cache_dir=tmp_path / "cache2",
                            log=lambda line: None, shard_words=30)
        shutil.copyfile(other.cache_path / "train-00001.h5", shard)
    else:
        shard.unlink()
    logs, again = refused_then_prepared_again(corpus, shard, tmp_path)
    assert any(str(shard) in line for line in logs) and any("preparing" in line for line in logs)
    assert_same(again, before)


@pytest.mark.parametrize("damage", ["flipped byte", "missing", "other counts"])
def test_damaged_counts_are_named_in_one_line_and_prepared_again(prepared, damage):
    tmp_path, corpus, _ = prepared
    before = arrays(corpus)
    path = corpus.cache_path / "valid-counts.npy"
    if damage == "flipped byte":
        flip_byte(path, -3)
    elif damage == "missing":
        path.unlink()
    else:                     # readable and of the right checksum, but not the split's
        manifest_path = corpus.cache_path / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        np.save(path, np.asarray(before["valid"]["lm_counts"]) + 1)
        manifest["splits"]["valid"]["lm_counts"]["sha256"] = shards.file_digest(path)
        manifest_path.write_text(json.dumps(manifest))
    _, again = refused_then_prepared_again(corpus, path, tmp_path)
    assert_same(again, before)


def test_the_stored_counts_are_the_counts_of_the_ids_and_required(prepared):
    """The target counts read from the counts files equal those counted from the ids; a
    manifest without a counts file is named (and the corpus prepared again)."""
    _, corpus, _ = prepared
    vocab = len(corpus.lm_vocab)
    for split in ("train", "test"):
        arrays = corpus.splits[split]
        counted = dataclasses.replace(arrays, lm_counts=None)
        np.testing.assert_array_equal(target_counts(arrays, vocab),
                                      target_counts(counted, vocab))
    assert target_counts(corpus.splits["train"], vocab).sum() == (
        len(corpus.splits["train"].lm_ids) + corpus.splits["train"].num_sentences)
    path = corpus.cache_path / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["splits"]["test"]["lm_counts"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(shard_checks.CorruptShard, match="no valid entry for the counts of "
                                                        "split test"):
        open_prepared(corpus.cache_path, "mine", corpus.source_dir, manifest["key"])


def test_a_manifest_of_another_format_is_named(prepared):
    _, corpus, _ = prepared
    path = corpus.cache_path / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "format": shards.SHARD_FORMAT + 1}))
    with pytest.raises(shard_checks.CorruptShard, match="of another format or preparation"):
        open_prepared(corpus.cache_path, "mine", corpus.source_dir, manifest["key"])


#: a preparation whose every shard takes 0.2 s more, so that it is surely killed midway
PREPARE = """
import sys, time
from pathlib import Path
from tcnlm_tf.config import DataConfig
from tcnlm_tf.data import shard_checks, sharded_array, shards
from tcnlm_tf.data.loading import load_corpus
flush = shards.ShardWriter._flush
shards.ShardWriter._flush = lambda self: (flush(self), time.sleep(0.2))
root = Path(sys.argv[1])
load_corpus(DataConfig(dataset="mine", data_dir=str(root / "data"), min_freq=1,
                       topic_min_docs=1), cache_dir=root / "cache", shard_words=20)
"""


def test_a_preparation_killed_with_sigkill_leaves_nothing_complete(tmp_path):
    """SIGKILL once shards are being written: no prepared corpus (or shard) looks complete,
    and the next preparation removes what was left and prepares the same arrays as one
    never interrupted."""
    write_corpus(tmp_path / "data", documents=400)
    prepared = tmp_path / "cache" / "prepared"
    proc = subprocess.Popen([sys.executable, "-c", PREPARE, str(tmp_path)], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    deadline = time.monotonic() + 120
    while len(list(prepared.glob(".*.tmp/train-*.h5"))) < 3:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no shard was written"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = list(prepared.iterdir())
    assert left and all(path.name.startswith(".") and path.name.endswith(".tmp")
                        for path in left), left           # only the killed one's own
    assert not list(prepared.glob("*/manifest.json"))
    logs = []
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=logs.append, shard_words=20)
    assert [path.name for path in prepared.iterdir()] == [corpus.cache_path.name]
    fresh = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "fresh",
                        log=lambda line: None, shard_words=20)
    assert_same(arrays(corpus), arrays(fresh))


def resident_file_mb() -> float:
    """This process's file-backed resident set (``RssFile``), MB."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile in /proc/self/status")


def _mapped_ids(tmp_path, count: int = 25 * 10**6) -> tuple[np.ndarray, np.memmap]:
    path = tmp_path / "ids.bin"
    values = np.arange(count, dtype=np.int32)
    values.tofile(path)
    return values, np.memmap(path, np.int32, "r")


def test_release_unmaps_the_pages_read_and_keeps_the_values(tmp_path):
    """Reading a 100 MB memory map whole (slices) puts it in the resident set
    (file-backed); release takes it out again, and the next read gives the same values."""
    values, mapped = _mapped_ids(tmp_path)
    array = ShardedArray([mapped[:10**7], mapped[10**7:]])
    assert int(array[:].sum(dtype=np.int64)) == int(values.sum(dtype=np.int64))
    read = resident_file_mb()
    array.release()
    assert read - resident_file_mb() >= 80
    np.testing.assert_array_equal(array[10**7 - 5:10**7 + 5], values[10**7 - 5:10**7 + 5])


def test_scattered_reads_map_nothing(tmp_path):
    """A batch's reads (integer arrays) go through pread: reading one element of every
    page of a 100 MB file leaves the resident set as it was (through the memory map, it
    brings in the whole file), with the right values, duplicates and order kept."""
    values, mapped = _mapped_ids(tmp_path)
    array = ShardedArray([mapped[:10**7], mapped[10**7:]], tail=7)
    assert mapped.nbytes > sharded_array.PREAD_ABOVE
    assert ShardedArray([mapped[:1000]]).files == [None]       # small: through the map
    before = resident_file_mb()
    every_page = np.arange(0, len(values), 1024)[::-1]
    index = np.concatenate([every_page, every_page[:3], [len(values)]]).reshape(-1, 1)
    np.testing.assert_array_equal(array[index],
                                  np.append(values[index[:-1, 0]], 7).reshape(-1, 1))
    assert resident_file_mb() - before < 10
    assert array[np.zeros((0, 3), np.int64)].shape == (0, 3)


def test_scattered_reads_keep_within_the_limit_of_open_files(tmp_path, monkeypatch):
    """More shard files than open descriptors allowed: each read still gives the right
    values; a file replaced while in use is an error, never another file's bytes."""
    monkeypatch.setattr(sharded_array, "PREAD_ABOVE", 0)
    monkeypatch.setattr(sharded_array._Descriptors, "LIMIT", 2)
    monkeypatch.setattr(sharded_array, "_DESCRIPTORS", sharded_array._Descriptors())
    pieces = []
    for k in range(5):
        path = tmp_path / f"piece-{k}.bin"
        np.arange(k * 1000, (k + 1) * 1000, dtype=np.int64).tofile(path)
        pieces.append(np.memmap(path, np.int64, "r"))
    array = ShardedArray(pieces)
    index = np.random.default_rng(0).integers(0, 5000, 300)
    for _ in range(3):
        np.testing.assert_array_equal(array[index], index)
    assert len(sharded_array._DESCRIPTORS._open) <= 2
    replaced = tmp_path / "piece-0.bin"
    replaced.unlink()
    np.zeros(1000, np.int64).tofile(replaced)
    with pytest.raises(OSError, match="replaced"):
        array[np.arange(1000)]
