"""The prepared corpus on disk (tcnlm_tf.data.shards): shards that read back as the text,
a damaged, truncated or foreign shard named in one line and prepared again, and a
preparation killed with SIGKILL that leaves nothing looking complete."""
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
from tcnlm_tf.data import shards
from tcnlm_tf.data.corpus import write_corpus_file
from tcnlm_tf.data.loading import load_corpus, open_prepared
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
    with pytest.raises(shards.CorruptShard) as error:
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
    assert shards.id_dtype(1 << 16) == np.uint16 and shards.id_dtype((1 << 16) + 1) == np.int32


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


def test_a_preparation_without_stored_counts_counts_the_ids(prepared):
    """A manifest without counts files (as the first shard layout wrote them) opens, and
    the target counts come from the ids: the same as the stored ones."""
    _, corpus, _ = prepared
    path = corpus.cache_path / "manifest.json"
    manifest = json.loads(path.read_text())
    for entry in manifest["splits"].values():
        del entry["lm_counts"]
    path.write_text(json.dumps(manifest))
    bare = open_prepared(corpus.cache_path, "mine", corpus.source_dir, manifest["key"])
    vocab = len(corpus.lm_vocab)
    for split in ("train", "test"):
        assert bare.splits[split].lm_counts is None
        np.testing.assert_array_equal(target_counts(bare.splits[split], vocab),
                                      target_counts(corpus.splits[split], vocab))
    assert target_counts(corpus.splits["train"], vocab).sum() == (
        len(corpus.splits["train"].lm_ids) + corpus.splits["train"].num_sentences)


def test_a_manifest_of_another_format_is_named(prepared):
    _, corpus, _ = prepared
    path = corpus.cache_path / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "format": shards.SHARD_FORMAT + 1}))
    with pytest.raises(shards.CorruptShard, match="of another format or preparation"):
        open_prepared(corpus.cache_path, "mine", corpus.source_dir, manifest["key"])


#: a preparation whose every shard takes 0.2 s more, so that it is surely killed midway
PREPARE = """
import sys, time
from pathlib import Path
from tcnlm_tf.config import DataConfig
from tcnlm_tf.data import shards
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


def test_release_unmaps_the_pages_read_and_keeps_the_values(tmp_path):
    """Reading every page of a 100 MB memory map puts it in the resident set (file-backed);
    release takes it out again, and the next read gives the same values."""
    path = tmp_path / "ids.bin"
    values = np.arange(25 * 10**6, dtype=np.int32)
    values.tofile(path)
    mapped = np.memmap(path, np.int32, "r")
    array = shards.ShardedArray([mapped[:10**7], mapped[10**7:]])
    every_page = np.arange(0, len(values), 1024)
    assert int(array[every_page].sum()) == int(values[every_page].sum())
    read = resident_file_mb()
    array.release()
    assert read - resident_file_mb() >= 80
    np.testing.assert_array_equal(array[every_page], values[every_page])
