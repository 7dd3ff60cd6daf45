"""A prepared corpus whose contents are wrong is never trusted, even when its manifest's
checksums agree with them (written so by a faulty or older writer): ids outside their
vocabulary or not integers, offsets out of order or past the data, counts that are not the
ids', vocabularies changed or swapped, a malformed or older manifest, a foreign shard. Each
is named in one line and the corpus prepared again, as a shard whose checksum does not
match is (tests/test_shards.py)."""
import json
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from tcnlm_tf.data import shard_checks, shards
from tcnlm_tf.data.corpus import write_corpus_file
from tcnlm_tf.data.loading import load_corpus
from tests.conftest import REPO_ROOT
from tests.test_shards import (arrays, assert_same, config, refused_then_prepared_again,
                               resident_file_mb, write_corpus)


def rewrite_shard(path, field, change):
    """Write the shard at ``path`` again with ``field`` replaced by ``change(field)``, the
    other arrays and the attributes kept, each contiguous as the writer stores them."""
    with h5py.File(path, "r") as h5:
        data = {name: h5[name][()] for name in h5}
        attrs = dict(h5.attrs)
    data[field] = change(data[field])
    path.unlink()
    with h5py.File(path, "w") as h5:
        for name in shards.ID_FIELDS + shards.OFFSET_FIELDS:
            h5.create_dataset(name, data=data[name])
        h5.attrs.update(attrs)


def edit_manifest(directory, change):
    """Apply ``change`` to the manifest of the prepared corpus in ``directory``."""
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def agree(directory):
    """Give every file the manifest lists the SHA-256 of its bytes as they are now: a
    manifest written for the damaged contents."""
    def visit(node):
        if isinstance(node, dict):
            if "file" in node and "sha256" in node:
                node["sha256"] = shards.file_digest(directory / node["file"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)
    edit_manifest(directory, visit)


def set_at(position, value):
    """A change that sets one entry of an array (``position``) to ``value``."""
    def change(array):
        array = array.copy()
        array[position] = value
        return array
    return change


def swap_lines(first, second):
    """A change of a text file's lines that swaps two of them."""
    def change(lines):
        lines[first], lines[second] = lines[second], lines[first]
        return lines
    return change


def shard_field(field, change):
    """A damage: ``change`` applied to one array of a shard."""
    return lambda path, n: rewrite_shard(path, field, change)


def lines_of(change):
    """A damage: ``change`` applied to the list of a text file's lines."""
    return lambda path, n: path.write_text("\n".join(change(path.read_text().splitlines()))
                                           + "\n")


def counts_of(change):
    """A damage: ``change`` applied to a counts file's array."""
    return lambda path, n: np.save(path, change(np.load(path), n))


#: damage -> (the file it changes; how, given the file and ``n``, the sizes of the
#: vocabularies; what the one line says of it once the manifest's checksums agree, with
#: ``{V}``, ``{TV}`` the vocabularies' sizes and ``{TV_1}`` one word less)
DAMAGES = {
    "LM id past the vocabulary": (
        "train-00001.h5", lambda path, n: rewrite_shard(path, "lm_ids", set_at(3, n["V"])),
        ["lm_ids", "id {V}", "{V} words"]),
    "topic id past the topic vocabulary": (
        "valid-00000.h5", lambda path, n: rewrite_shard(path, "topic_ids", set_at(0, n["TV"])),
        ["topic_ids", "id {TV}", "{TV} words"]),
    "float ids": (
        "train-00001.h5", shard_field("lm_ids", lambda a: a.astype(np.float32)),
        ["lm_ids", "float32", "uint16"]),
    "sentence offset past the data": (
        "train-00001.h5", shard_field("sent_offsets", set_at(-1, 10**6)),
        ["sent_offsets", "1000000", "past"]),
    "sentence offsets decreasing": (
        "test-00002.h5", shard_field("sent_offsets", lambda a: a[[0, 2, 1, *range(3, len(a))]]),
        ["sent_offsets", "decrease"]),
    "topic offsets decreasing": (
        "train-00000.h5", shard_field("topic_offsets", lambda a: set_at(2, a[1] - 1)(a)),
        ["topic_offsets", "decrease"]),
    "document offset past the data": (
        "train-00002.h5", shard_field("doc_offsets", set_at(-1, 10**6)),
        ["doc_offsets", "past"]),
    "offsets not beginning where their shard begins": (
        "train-00001.h5", shard_field("sent_offsets", lambda a: a + 1),
        ["sent_offsets", "begin"]),
    "float offsets": (
        "train-00001.h5", shard_field("sent_offsets", lambda a: a.astype(np.float64)),
        ["sent_offsets", "float64", "int64"]),
    "int32 offsets": (
        "valid-00001.h5", shard_field("doc_offsets", lambda a: a.astype(np.int32)),
        ["doc_offsets", "int32", "int64"]),
    "document lines out of order": (
        "train-00001.h5", shard_field("doc_lines", lambda a: a[::-1].copy()),
        ["doc_lines"]),
    "counts of other values that add up": (
        "train-counts.npy", counts_of(lambda counts, n: np.roll(counts, 1)),
        ["not the counts of the split's ids"]),
    "counts longer than the vocabulary": (
        "valid-counts.npy",
        counts_of(lambda counts, n: np.concatenate([counts, np.zeros(n["V"], np.int64)])),
        ["{V} words", "LM vocabulary"]),
    "counts of another shape": (
        "test-counts.npy", counts_of(lambda counts, n: counts[None]),
        ["shape"]),
    "LM vocabulary with a duplicate word": (
        "lm_vocab.txt", lines_of(lambda words: words[:-1] + [words[-2]]),
        ["unreadable", "unique"]),
    "LM vocabulary without <unk>": (
        "lm_vocab.txt", lines_of(lambda words: [w if w != "<unk>" else "unk" for w in words]),
        ["unreadable", "<unk>"]),
    "topic vocabulary one word short": (
        "topic_vocab.txt", lines_of(lambda words: words[:-1]),
        ["{TV_1} words", "{TV}"]),
}

#: damages that only a checksum tells (the contents are as valid as before), and missing
#: files: the manifest left as it was
STALE_ONLY = {
    "permuted ids": ("train-00001.h5", shard_field("lm_ids", lambda a: a[::-1].copy()),
                     ["does not match its checksum"]),
    "LM vocabulary lines swapped": ("lm_vocab.txt", lines_of(swap_lines(5, 6)),
                                    ["does not match its checksum"]),
    "LM vocabulary one word short": ("lm_vocab.txt", lines_of(lambda words: words[:-1]),
                                     ["does not match its checksum"]),
    "topic vocabulary lines swapped": ("topic_vocab.txt", lines_of(swap_lines(0, 1)),
                                       ["does not match its checksum"]),
    "no LM vocabulary": ("lm_vocab.txt", lambda path, n: path.unlink(), ["missing"]),
}


@pytest.fixture()
def prepared(tmp_path):
    """A small corpus prepared in shards of about 30 words (several a split)."""
    write_corpus(tmp_path / "data")
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=lambda line: None, shard_words=30)
    return tmp_path, corpus


def assert_named_and_prepared_again(tmp_path, corpus, before, damaged, fragments=()):
    """Opening refuses the corpus in one line naming ``damaged`` (and each of ``fragments``);
    load_corpus logs that line once, prepares the corpus again and gets the arrays it had
    ``before`` the damage."""
    logs, again = refused_then_prepared_again(corpus, damaged, tmp_path)
    notices = [line for line in logs if str(damaged) in line and "preparing it again" in line]
    assert len(notices) == 1, logs
    for fragment in fragments:
        assert fragment in notices[0], (fragment, notices[0])
    assert any(line.startswith("preparing mine") for line in logs), logs
    assert_same(again, before)


def sizes(corpus):
    """The sizes the fragments of DAMAGES stand for."""
    lm, topic = len(corpus.lm_vocab), len(corpus.topic_vocab)
    return {"V": lm, "TV": topic, "TV_1": topic - 1}


@pytest.mark.parametrize("damage", [*DAMAGES, *STALE_ONLY])
def test_a_file_changed_under_its_checksum_is_named_and_prepared_again(prepared, damage):
    """The manifest left as it was: the file's checksum no longer matches, whatever changed
    in it (ids permuted and vocabulary lines swapped included, which nothing else tells)."""
    tmp_path, corpus = prepared
    before = arrays(corpus)
    name, change, _ = DAMAGES.get(damage) or STALE_ONLY[damage]
    change(corpus.cache_path / name, sizes(corpus))
    fragments = STALE_ONLY[damage][2] if damage in STALE_ONLY else ["does not match its checksum"]
    assert_named_and_prepared_again(tmp_path, corpus, before, corpus.cache_path / name,
                                    fragments)


@pytest.mark.parametrize("damage", DAMAGES)
def test_wrong_contents_whose_checksums_agree_are_named_and_prepared_again(prepared, damage):
    """The manifest rewritten for the damaged file (its checksum agrees): the contents are
    checked where the checksums are, and the line says what is wrong."""
    tmp_path, corpus = prepared
    before = arrays(corpus)
    name, change, fragments = DAMAGES[damage]
    change(corpus.cache_path / name, sizes(corpus))
    agree(corpus.cache_path)
    assert_named_and_prepared_again(tmp_path, corpus, before, corpus.cache_path / name,
                                    [fragment.format(**sizes(corpus)) for fragment in fragments])


def test_a_vocabulary_one_word_short_with_a_manifest_to_match_is_named(prepared):
    """The LM vocabulary's last word removed, its checksum and size in the manifest made
    to agree: every word of the vocabulary is in the training split, so a shard holds the
    id that is now past it."""
    tmp_path, corpus = prepared
    before = arrays(corpus)
    lines_of(lambda words: words[:-1])(corpus.cache_path / "lm_vocab.txt", sizes(corpus))
    agree(corpus.cache_path)
    size = len(corpus.lm_vocab) - 1

    def shorter(manifest):
        if "vocabularies" in manifest:
            manifest["vocabularies"]["lm"]["words"] = size
    edit_manifest(corpus.cache_path, shorter)
    assert_named_and_prepared_again(tmp_path, corpus, before, corpus.cache_path,
                                    ["lm_ids", f"id {size}", f"{size} words"])


def test_a_foreign_shard_with_its_own_manifest_entry_is_named(prepared):
    """A shard of another prepared corpus dropped in with its manifest entry (checksum,
    sizes) and the split's totals made to add up: its offsets do not begin where the
    shard begins in this corpus's split."""
    tmp_path, corpus = prepared
    before = arrays(corpus)
    write_corpus(tmp_path / "other", seed=1)
    other = load_corpus(config(tmp_path / "other"), cache_dir=tmp_path / "cache2",
                        log=lambda line: None, shard_words=30)
    shard = corpus.cache_path / "train-00001.h5"
    shutil.copyfile(other.cache_path / "train-00001.h5", shard)
    theirs = json.loads((other.cache_path / "manifest.json").read_text())

    def foreign(manifest):
        entry = manifest["splits"]["train"]
        entry["shards"][1] = theirs["splits"]["train"]["shards"][1]
        for total in ("documents", "sentences", "words", "topic_words"):
            entry[total] = sum(shard[total] for shard in entry["shards"])
    edit_manifest(corpus.cache_path, foreign)
    assert_named_and_prepared_again(tmp_path, corpus, before, shard, ["sent_offsets", "begin"])


#: a manifest that cannot describe a preparation -> the change that makes it so
MALFORMED = {
    "no splits": lambda m: m.pop("splits"),
    "a shard entry without its words": lambda m: m["splits"]["train"]["shards"][1].pop("words"),
    "a count that is text": lambda m: m["splits"]["test"]["shards"][0].update(sentences="7"),
    "a shard file outside the corpus": lambda m: m["splits"]["valid"]["shards"][0].update(
        file="../valid-00000.h5"),
    "a split whose shards do not add up to it": lambda m: m["splits"]["valid"].update(
        words=m["splits"]["valid"]["words"] + 1),
    "vocabularies that are not entries": lambda m: m.update(vocabularies=["lm_vocab.txt"]),
}


@pytest.mark.parametrize("damage", MALFORMED)
def test_a_malformed_manifest_is_named_and_prepared_again(prepared, damage):
    tmp_path, corpus = prepared
    before = arrays(corpus)
    edit_manifest(corpus.cache_path, MALFORMED[damage])
    assert_named_and_prepared_again(tmp_path, corpus, before,
                                    corpus.cache_path / "manifest.json")


@pytest.mark.parametrize("version", ["first", "next"])
def test_a_manifest_of_another_format_is_prepared_again(prepared, version):
    """The first shard layout (format 1), whose manifest has no vocabularies, or a newer
    one: named in one line and prepared again."""
    tmp_path, corpus = prepared
    before = arrays(corpus)

    def other(manifest):
        if version == "first":
            manifest["format"] = 1
            manifest.pop("vocabularies", None)
        else:
            manifest["format"] = shards.SHARD_FORMAT + 1
    edit_manifest(corpus.cache_path, other)
    assert_named_and_prepared_again(tmp_path, corpus, before,
                                    corpus.cache_path / "manifest.json", ["another format"])


def write_large_vocabulary_corpus(root):
    """A corpus of 70,000 distinct words (an LM vocabulary past 65,536: int32 ids), in
    documents of 500 words."""
    for split, words in (("train", 70_000), ("valid", 600), ("test", 600)):
        write_corpus_file(root / "mine" / f"{split}.txt", (
            [[f"w{i}" for i in range(start, min(start + 500, words))]]
            for start in range(0, words, 500)))


def test_negative_ids_of_an_int32_shard_are_named(tmp_path):
    write_large_vocabulary_corpus(tmp_path / "data")
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=lambda line: None, shard_words=30)
    assert corpus.splits["train"].lm_ids.dtype == np.int32
    before = arrays(corpus)
    shard = corpus.cache_path / "train-00003.h5"
    rewrite_shard(shard, "lm_ids", set_at(7, -3))
    agree(corpus.cache_path)
    assert_named_and_prepared_again(tmp_path, corpus, before, shard, ["lm_ids", "id -3"])


def test_the_checks_find_damage_where_two_chunks_meet(prepared, monkeypatch):
    """Read 4 entries at a time, offsets that go down from one chunk to the next and an id
    past the vocabulary as a chunk's last entry are still found."""
    tmp_path, corpus = prepared
    monkeypatch.setattr(shard_checks, "CHECK_CHUNK", 4)
    before = arrays(corpus)
    shard = corpus.cache_path / "train-00001.h5"
    rewrite_shard(shard, "sent_offsets", lambda a: a[[0, 1, 2, 4, 3, *range(5, len(a))]])
    agree(corpus.cache_path)
    assert_named_and_prepared_again(tmp_path, corpus, before, shard, ["sent_offsets",
                                                                      "decrease"])
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=lambda line: None, shard_words=30)
    rewrite_shard(shard, "lm_ids", set_at(7, len(corpus.lm_vocab)))
    agree(corpus.cache_path)
    assert_named_and_prepared_again(tmp_path, corpus, before, shard, ["lm_ids"])


def test_checking_ids_holds_one_chunk_of_the_memory_map(tmp_path):
    """Checking 100 MB of memory-mapped ids leaves at most a few chunks' pages in the
    resident set (each chunk's pages are unmapped once checked), and reads every id."""
    path = tmp_path / "ids.bin"
    (np.arange(50 * 10**6) % 50_000).astype(np.uint16).tofile(path)
    ids = np.memmap(path, np.uint16, "r")
    start = resident_file_mb()
    largest, total = shard_checks.check_ids(path, "lm_ids", ids, 50_000)
    assert resident_file_mb() - start < 20
    assert (largest, total) == (49_999, 1000 * 49_999 * 50_000 // 2)


@pytest.mark.slow
def test_training_on_a_cache_with_ids_past_the_vocabulary_prepares_it_again(tmp_path):
    """Ids past the vocabulary under a checksum that agrees, on the command line: training
    prints the one line naming the shard, prepares the corpus again and trains (it used to
    stop in the middle of the epoch with TensorFlow's traceback)."""
    write_corpus(tmp_path / "data")
    corpus = load_corpus(config(tmp_path / "data"), cache_dir=tmp_path / "cache",
                         log=lambda line: None)
    shard = corpus.cache_path / "train-00000.h5"
    rewrite_shard(shard, "lm_ids", set_at(2, len(corpus.lm_vocab) + 5))
    agree(corpus.cache_path)
    result = subprocess.run(
        [sys.executable, "-m", "train.run", "--dataset", "mine", "--data-dir",
         str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache"), "--runs-dir",
         str(tmp_path / "runs"), "--min-freq", "1", "--topic-min-docs", "1", "--model", "lstm",
         "--hidden-size", "8", "--embedding-dim", "8", "--batch-size", "8", "--seq-len", "8",
         "--epochs", "1", "--log-every", "100"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    notices = [line for line in result.stdout.splitlines() if str(shard) in line]
    assert len(notices) == 1 and "lm_ids" in notices[0], result.stdout
