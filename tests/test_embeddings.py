"""Reading pre-trained word vectors in the word2vec text and binary formats."""
import struct

import numpy as np
import pytest

from tcnlm_tf.embeddings import load_vectors, read_header
from tcnlm_tf.errors import UserError

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


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found: .*nope.bin"):
        read_header(tmp_path / "nope.bin")
