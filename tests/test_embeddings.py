"""Pre-trained word vectors: reading and writing the word2vec text and binary formats,
training them with ``train.word2vec``, and ``--embeddings`` loading them into every model."""
import struct

import numpy as np
import pytest

from tcnlm_tf.data.embeddings import load_vectors, read_header, read_vectors, write_vectors
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.registry import MODELS
from tests.conftest import TINY, run_flags

DIM = 4
VECTORS = {
    "the": [0.25, -1.5, 3.0, 0.125],
    "café": [1.0, 2.0, -3.0, 4.5],
    "cat": [-0.5, 0.75, 0.0, 2.25],
    "dog": [9.0, -9.0, 0.5, -0.25],
}


def write_text(path, vectors=VECTORS, dim=DIM, count=None):
    lines = [f"{len(vectors) if count is None else count} {dim}"]
    lines += [" ".join([word] + [repr(v) for v in values]) for word, values in vectors.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def binary_bytes(vectors=VECTORS, dim=DIM, newline=True, count=None):
    out = f"{len(vectors) if count is None else count} {dim}\n".encode("ascii")
    for word, values in vectors.items():
        out += word.encode("utf-8") + b" " + struct.pack(f"<{dim}f", *values)
        out += b"\n" if newline else b""
    return out


def write_binary(path, **kwargs):
    path.write_bytes(binary_bytes(**kwargs))
    return path


def expected_rows(words):
    return np.array([VECTORS[w] for w in words], dtype=np.float32)


@pytest.mark.parametrize("kind", ["text", "binary", "binary-no-newline"])
def test_read_header_detects_format(tmp_path, kind):
    if kind == "text":
        path = write_text(tmp_path / "v.bin")          # the extension does not matter
    else:
        path = write_binary(tmp_path / "v.txt", newline=kind == "binary")
    assert read_header(path) == (4, DIM, "text" if kind == "text" else "binary")


def test_text_and_binary_give_identical_matrices(tmp_path):
    words = ["<pad>", "cat", "café", "unseen", "the"]
    files = [write_text(tmp_path / "v.txt"), write_binary(tmp_path / "nl.bin"),
             write_binary(tmp_path / "raw.bin", newline=False)]
    results = [load_vectors(path, words, DIM, seed=3) for path in files]
    for matrix, found in results:
        assert matrix.dtype == np.float32 and matrix.shape == (5, DIM)
        assert found == 3
        np.testing.assert_array_equal(matrix[[1, 2, 4]], expected_rows(["cat", "café", "the"]))
        np.testing.assert_array_equal(matrix, results[0][0])


def test_non_ascii_word_is_read(tmp_path):
    for path in (write_text(tmp_path / "v.txt"), write_binary(tmp_path / "v.bin")):
        matrix, found = load_vectors(path, ["café"], DIM)
        assert found == 1
        np.testing.assert_array_equal(matrix[0], VECTORS["café"])


def test_missing_words_are_small_random_and_deterministic(tmp_path):
    path = write_binary(tmp_path / "v.bin")
    words = [f"w{i}" for i in range(50)] + ["dog"]
    a, found = load_vectors(path, words, DIM, seed=7)
    b, _ = load_vectors(path, words, DIM, seed=7)
    c, _ = load_vectors(path, words, DIM, seed=8)
    assert found == 1
    np.testing.assert_array_equal(a[-1], VECTORS["dog"])
    random_rows = a[:-1]
    assert np.all(np.abs(random_rows) <= 0.5 / DIM)
    assert np.std(random_rows) > 0.05 / DIM                # not all zeros
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:-1], c[:-1])


def test_first_of_duplicate_words_is_kept(tmp_path):
    path = tmp_path / "dup.bin"
    path.write_bytes(binary_bytes(count=5)
                     + b"cat " + struct.pack(f"<{DIM}f", 7, 7, 7, 7) + b"\n")
    matrix, found = load_vectors(path, ["cat"], DIM)
    assert found == 1
    np.testing.assert_array_equal(matrix[0], VECTORS["cat"])


@pytest.mark.parametrize("writer", [write_text, write_binary])
def test_dimension_mismatch(tmp_path, writer):
    path = writer(tmp_path / "v")
    with pytest.raises(UserError, match=r"4-dimensional .* size is 300: pass "
                                        r"--embedding-dim 4") as err:
        load_vectors(path, ["cat"], 300)
    assert str(path) in str(err.value)


def malformed_files(tmp_path):
    rng = np.random.default_rng(0)
    text = write_text(tmp_path / "ok.txt").read_text(encoding="utf-8").splitlines()
    garbage_records = b"5 16\n" + rng.integers(0, 256, 2000, dtype=np.uint8).tobytes()
    return {
        "random bytes": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "empty": b"",
        "bad header": b"hello world\n" + b"\n".join(line.encode() for line in text[1:]),
        "negative count": b"-4 4\n" + b"\n".join(line.encode() for line in text[1:]),
        "header only": b"4 4",
        "random records": garbage_records,
        "short text row": "\n".join(text[:2] + ["cat 1.0 2.0"] + text[3:]).encode("utf-8"),
        "truncated binary": binary_bytes()[:-7],
        "truncated first binary record": binary_bytes()[:12],
        "too few text records": "\n".join(text[:4]).encode("utf-8"),
        "text value not a number": "\n".join(text[:2] + ["cat 1 2 x 4"]).encode("utf-8"),
        "implausible binary values": b"1 4\nword " + struct.pack("<4f", 1, 2, 3e30, 4),
    }


#: what each malformed file's message must say (besides the file's path)
MALFORMED_MESSAGES = {
    "random bytes": r"not a word2vec file: its first line \(binary data\)",
    "empty": "is empty",
    "bad header": "first line 'hello world' is not two positive integers",
    "negative count": "first line '-4 4' is not two positive integers",
    "header only": "truncated.* record 1 ",
    "random records": "record 1 of .* is not a '<word> <16 float32 values>' binary record",
    "short text row": r"record 2 \(line 3\) of .* has 2 values but the header says 4",
    "truncated first binary record": "truncated.* record 1 ",
    "text value not a number": r"record 2 \(line 3\) .* not a number",
    "implausible binary values": "record 1 of .* not word-vector numbers",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_MESSAGES))
def test_read_header_rejects_malformed_files(tmp_path, case):
    path = tmp_path / "vectors.dat"
    path.write_bytes(malformed_files(tmp_path)[case])
    with pytest.raises(UserError, match=MALFORMED_MESSAGES[case]) as err:
        read_header(path)
    message = str(err.value)
    assert str(path) in message and "\n" not in message


@pytest.mark.parametrize("case, record", [("truncated binary", 4), ("too few text records", 4)])
def test_truncated_file_names_the_record(tmp_path, case, record):
    path = tmp_path / "vectors.dat"
    path.write_bytes(malformed_files(tmp_path)[case])
    read_header(path)                                   # the first records are fine
    with pytest.raises(UserError, match=rf"truncated.* record {record}\b") as err:
        load_vectors(path, ["cat", "not-in-file"], DIM)
    assert str(path) in str(err.value)


def test_short_text_row_later_in_file_is_reported(tmp_path):
    vectors = dict(VECTORS, **{f"w{i}": [0.0] * DIM for i in range(5)})
    path = write_text(tmp_path / "v.txt", vectors=vectors)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[7] = "w2 1.0"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    read_header(path)                                   # only the first records are checked
    with pytest.raises(UserError, match=r"record 7 \(line 8\) of .*v\.txt has 1 values"):
        load_vectors(path, ["nowhere"], DIM)


@pytest.mark.parametrize("writer", [write_text, write_binary])
@pytest.mark.parametrize("record, value", [(1, float("nan")), (4, float("inf")),
                                           (4, float("-inf"))])
def test_a_vector_that_is_not_finite_is_refused_naming_its_record(tmp_path, writer, record,
                                                                  value):
    """A text file with nan in it is text (it was read as binary, every vector garbage), and
    a record that is not finite, in either format, first or later, is one error naming it."""
    vectors = {word: list(values) for word, values in VECTORS.items()}
    vectors[list(VECTORS)[record - 1]][2] = value
    path = writer(tmp_path / "v.w2v", vectors=vectors)
    if writer is write_text and record > 3:
        assert read_header(path)[2] == "text"          # the first 3 records are finite
    with pytest.raises(UserError, match=f"record {record}.*not finite"):
        read_vectors(path, list(VECTORS), DIM)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found: .*nope.bin"):
        read_header(tmp_path / "nope.bin")


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_written_vectors_read_back_exactly(tmp_path, fmt):
    words = ["the", "café", "u.s.", "<unk>"]
    vectors = np.random.default_rng(0).normal(size=(4, DIM)).astype(np.float32)
    path = tmp_path / f"v.{fmt}"
    write_vectors(path, words, vectors, fmt)
    assert read_header(path) == (4, DIM, fmt)
    matrix, found = read_vectors(path, ["u.s.", "absent", "café", "the", "<unk>"], DIM)
    np.testing.assert_array_equal(found, [True, False, True, True, True])
    np.testing.assert_array_equal(matrix[[0, 2, 3, 4]], vectors[[2, 1, 0, 3]])
    with pytest.raises(ValueError, match="cannot be written"):
        write_vectors(path, ["two words"], vectors[:1], fmt)


# ---------------------------------------------- --embeddings in every model, train.word2vec
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("embeddings")


def trainer_for(workdir, flags, name):
    from tcnlm_tf.data.loading import load_corpus
    from train.run import build_parser, config_from_args
    from train.trainer import Trainer

    config = config_from_args(build_parser().parse_args(TINY + flags + run_flags(workdir, name)))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    return Trainer(config, corpus, workdir / "runs" / name, log=lambda _: None)


@pytest.fixture(scope="module")
def word2vec_file(workdir):
    """Vectors of TINY's embedding size trained by train.word2vec on TINY's training split
    (TINY's --synthetic settings, so the same corpus the models read)."""
    from train.word2vec import main

    path = workdir / "w2v.bin"
    main(word2vec_flags(workdir) + ["--output", str(path)])
    return path


def word2vec_flags(workdir):
    """train.word2vec on TINY's corpus and embedding size, 2 epochs."""
    synthetic = [x for i, x in enumerate(TINY) if TINY[i - 1] == "--synthetic"]
    return [x for setting in synthetic for x in ("--synthetic", setting)] + [
        "--cache-dir", str(workdir / "cache"), "--dim", TINY[TINY.index("--embedding-dim") + 1],
        "--epochs", "2", "--min-count", "1"]


def test_word2vec_is_reproducible_and_rejects_bad_settings(workdir, word2vec_file, capsys):
    from train.word2vec import main

    again = workdir / "again.txt"
    main(word2vec_flags(workdir) + ["--output", str(again), "--format", "text"])
    count, dim, _ = read_header(word2vec_file)
    assert read_header(again) == (count, dim, "text") and count > 100
    words = [line.split(" ", 1)[0] for line in again.read_text("utf-8").splitlines()[1:]]
    first, found = read_vectors(word2vec_file, words, dim)
    second, _ = read_vectors(again, words, dim)
    assert found.all()
    np.testing.assert_allclose(first, second, atol=1e-6)     # same seed, one worker
    for bad, fragment in ((["--sample", "2"], "--sample must be in [0, 1)"),
                          (["--dataset", "apnews", "--data-dir", str(workdir / "none")],
                           "apnews corpus not found")):
        with pytest.raises(SystemExit) as stop:
            main(bad + ["--output", str(workdir / "bad.bin")])
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], err
    with pytest.raises(SystemExit) as stop:                 # argparse's error for the flag
        main(["--dim", "0", "--output", str(workdir / "bad.bin")])
    assert stop.value.code == 2
    assert "argument --dim: expected an integer from 1" in capsys.readouterr().err


@pytest.mark.parametrize("model", sorted(MODELS))
def test_embeddings_initialise_every_table_of_every_model(workdir, word2vec_file, model):
    """--embeddings with train.word2vec's vectors: every word-embedding table of the model
    (the LM's and, for TDLM and LCLM, the topic side's) holds the file's vector for every
    word the file has, before training."""
    trainer = trainer_for(workdir, ["--model", model, *MODELS[model].test_flags,
                                    "--embeddings", str(word2vec_file)], model)
    logged = []
    trainer.model.prepare(trainer.corpus, trainer.run_dir, logged.append)
    vocabularies = {"lm": trainer.corpus.lm_vocab.words,
                    "topic": trainer.corpus.topic_vocab.words}
    tables = trainer.model.embedding_tables()
    assert len(tables) == (2 if model in ("tdlm", "lclm") else 1)
    for variable, name in tables:
        expected, found = read_vectors(word2vec_file, vocabularies[name], variable.shape[1])
        assert found.sum() > 0.5 * len(found)
        np.testing.assert_allclose(variable.numpy()[found], expected[found], atol=1e-6)
        assert any(f"{found.sum()} of {len(found)} {name.upper()} words found" in line
                   for line in logged)
