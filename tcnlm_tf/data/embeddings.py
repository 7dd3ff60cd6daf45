"""Pre-trained word vectors in the word2vec formats (the TDLM paper initialises its word
embeddings from the 300-d Google News vectors; users bring such a file themselves).

Both formats start with an ASCII header line ``"<count> <dim>"``; then ``count`` records:

* text: one line per word, ``"<word> <v1> ... <vdim>"``, fields separated by spaces;
* binary (the word2vec C tool, gensim's ``save_word2vec_format(binary=True)``): the word's
  UTF-8 bytes, one space, ``dim`` little-endian float32 values (``4 * dim`` raw bytes), and
  optionally a newline (newlines before a word are skipped, so files with or without one
  read alike).

The format is detected from the content, not the file name. Files are streamed: only the
rows for the requested words are kept, so a 3.6 GB Google News file needs little memory.
"""
from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

import numpy as np

from tcnlm_tf.errors import UserError

TEXT = "text"
BINARY = "binary"

#: records checked by :func:`read_header` to tell (and validate) the format
_PROBE_RECORDS = 3
#: a binary word longer than this (bytes) means the file is not word2vec binary
_MAX_WORD_BYTES = 100_000
#: a binary value this large (or not finite) means the bytes are not word vectors
_MAX_ABS_VALUE = 1e6
_CHUNK = 1 << 20
_FORMAT_HINT = ("expected word2vec text or binary format: a '<count> <dim>' first line, "
                "then one '<word> <values>' record per word")


def read_header(path: Path | str) -> tuple[int, int, str]:
    """``(count, dim, format)`` of a word2vec file, ``format`` being ``"text"`` or
    ``"binary"``. Reads only the header and the first few records, so it is cheap to call
    at start-up. Raises :class:`UserError` for a missing, empty or malformed file."""
    with _open(path) as f:
        count, dim = _parse_header(f, path)
        start = f.tell()
        line = f.readline(64 * dim + _MAX_WORD_BYTES)
        fmt = TEXT if _looks_like_text(line) else BINARY
        f.seek(start)
        records = _text_records if fmt == TEXT else _binary_records
        for _ in zip(range(_PROBE_RECORDS), records(f, path, count, dim, lambda word: True)):
            pass
    return count, dim, fmt


def load_vectors(path: Path | str, words: Sequence[str], dim: int,
                 seed: int = 0) -> tuple[np.ndarray, int]:
    """:func:`read_vectors`, with the number of rows taken from the file instead of which."""
    matrix, found = read_vectors(path, words, dim, seed)
    return matrix, int(found.sum())


def read_vectors(path: Path | str, words: Sequence[str], dim: int,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A float32 matrix ``[len(words), dim]`` whose row ``i`` is the file's vector for
    ``words[i]``, or random uniform in ``±0.5 / dim`` (as TDLM's ``init_embedding``) when
    the file lacks the word; and a bool ``[len(words)]``, True for the rows from the file.

    When the file holds a word twice the first vector is kept. Reading stops once every
    word has been found; a file that ends before its header's count of records (or inside a
    record) raises :class:`UserError`, as does a dimension other than ``dim``.
    """
    count, file_dim, fmt = read_header(path)
    if file_dim != dim:
        raise UserError(f"{path} holds {file_dim}-dimensional vectors but the model's "
                        f"embedding size is {dim}: pass --embedding-dim {file_dim} "
                        f"(or another file)")
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-0.5 / dim, 0.5 / dim, size=(len(words), dim)).astype(np.float32)
    rows: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        rows.setdefault(word, []).append(i)
    found = np.zeros(len(words), bool)
    records = _text_records if fmt == TEXT else _binary_records
    with _open(path) as f:
        _parse_header(f, path)
        for word, vector in records(f, path, count, dim, rows.__contains__):
            if vector is None:
                continue
            for i in rows.pop(word):
                matrix[i] = vector
                found[i] = True
            if not rows:
                break
    return matrix, found


def write_vectors(path: Path | str, words: Sequence[str], vectors: np.ndarray,
                  fmt: str = BINARY) -> None:
    """Write ``vectors [len(words), dim]`` as a word2vec ``fmt`` (``"binary"`` or ``"text"``)
    file that :func:`load_vectors` reads, atomically (a reader never sees half a file).
    Words must be non-empty and hold no whitespace."""
    from tcnlm_tf.data.corpus import atomic_write

    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(words) or fmt not in (BINARY, TEXT):
        raise ValueError(f"write_vectors needs one row per word and a format in {BINARY, TEXT}, "
                         f"got {len(words)} words, shape {vectors.shape}, format {fmt!r}")
    bad = next((w for w in words if not w or len(w.split()) != 1 or w.strip() != w), None)
    if bad is not None:
        raise ValueError(f"word {bad!r} cannot be written to a word2vec file")

    def write(handle: BinaryIO) -> None:
        handle.write(f"{len(words)} {vectors.shape[1]}\n".encode("ascii"))
        for word, row in zip(words, vectors):
            if fmt == BINARY:
                handle.write(word.encode("utf-8") + b" " + row.astype("<f4").tobytes() + b"\n")
            else:
                handle.write((word + " " + " ".join(repr(float(v)) for v in row) + "\n")
                             .encode("utf-8"))

    atomic_write(Path(path), write)


def _open(path: Path | str) -> BinaryIO:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"word-vector file not found: {path} (pass the path of a word2vec "
                        f"text or binary file)") from None
    except OSError as err:
        raise UserError(f"cannot read word-vector file {path}: {err.strerror}") from None


def _parse_header(f: BinaryIO, path: Path | str) -> tuple[int, int]:
    line = f.readline(256)
    if not line:
        raise UserError(f"word-vector file {path} is empty ({_FORMAT_HINT})")
    fields = line.split()
    try:
        count, dim = (int(field) for field in fields)  # ValueError: not two integers
        if count <= 0 or dim <= 0:
            raise ValueError
    except ValueError:
        shown = line[:40].decode("ascii", errors="replace").strip()
        shown = repr(shown) if shown.isprintable() else "(binary data)"
        raise UserError(f"{path} is not a word2vec file: its first line {shown} is not "
                        f"two positive integers '<count> <dim>' ({_FORMAT_HINT})") from None
    if not line.endswith(b"\n"):
        raise _truncated(path, 1, count)
    return count, dim


def _looks_like_text(line: bytes) -> bool:
    """Whether a record line is text: UTF-8, a word and at least one number (``nan`` and
    ``inf`` included: they make the record invalid, not the file binary)."""
    try:
        fields = line.decode("utf-8").split()
        return len(fields) >= 2 and all(float(v) is not None for v in fields[1:])
    except (UnicodeDecodeError, ValueError):
        return False


def _not_finite(path: Path | str, where: str) -> UserError:
    return UserError(f"{where} of {path} holds a value that is not finite (nan or inf): "
                     "fix or re-export the file")


def _truncated(path: Path | str, record: int, count: int) -> UserError:
    return UserError(f"{path} is truncated: it ends in or before record {record} but its "
                     f"header says {count} records (re-download or re-export the file)")


def _text_records(f: BinaryIO, path: Path | str, count: int, dim: int,
                  wanted) -> Iterator[tuple[str, np.ndarray | None]]:
    """``(word, vector or None when not wanted)`` for each text record."""
    for record in range(1, count + 1):
        line = f.readline()
        if not line:
            raise _truncated(path, record, count)
        fields = line.split()
        if len(fields) != dim + 1:
            raise UserError(f"record {record} (line {record + 1}) of {path} has "
                            f"{max(len(fields) - 1, 0)} values but the header says {dim}: "
                            f"fix or re-export the file")
        word = fields[0].decode("utf-8", errors="replace")
        if not wanted(word):
            yield word, None
            continue
        try:
            vector = np.array([float(v) for v in fields[1:]], dtype=np.float32)
        except ValueError:
            raise UserError(f"record {record} (line {record + 1}) of {path} has a value "
                            f"that is not a number: fix or re-export the file") from None
        if not np.all(np.isfinite(vector)):
            raise _not_finite(path, f"record {record} (line {record + 1})")
        yield word, vector


def _binary_records(f: BinaryIO, path: Path | str, count: int, dim: int,
                    wanted) -> Iterator[tuple[str, np.ndarray | None]]:
    """``(word, vector or None when not wanted)`` for each binary record."""
    size = 4 * dim
    buf, pos = b"", 0

    def fill(n: int) -> bool:
        """Make ``n`` bytes available from ``pos``; False at end of file."""
        nonlocal buf, pos
        while len(buf) - pos < n:
            more = f.read(max(_CHUNK, n))
            if not more:
                return False
            buf, pos = buf[pos:] + more, 0
        return True

    for record in range(1, count + 1):
        while fill(1) and buf[pos] == 0x0A:          # newline after the previous vector
            pos += 1
        end = buf.find(b" ", pos)
        while end < 0 and len(buf) - pos <= _MAX_WORD_BYTES:
            if not fill(len(buf) - pos + 1):
                raise _truncated(path, record, count)
            end = buf.find(b" ", pos)
        raw_word = buf[pos:end]
        if end < 0 or len(raw_word) > _MAX_WORD_BYTES or b"\n" in raw_word or not raw_word:
            raise UserError(f"record {record} of {path} is not a '<word> <{dim} float32 "
                            f"values>' binary record: the file is corrupt or not a "
                            f"word2vec file ({_FORMAT_HINT})")
        pos = end + 1
        if not fill(size):
            raise _truncated(path, record, count)
        word = raw_word.decode("utf-8", errors="replace")
        check = record <= _PROBE_RECORDS
        if not (check or wanted(word)):
            pos += size
            yield word, None
            continue
        vector = np.frombuffer(buf, dtype="<f4", count=dim, offset=pos).astype(np.float32)
        pos += size
        if check and not (np.all(np.isfinite(vector))
                          and np.max(np.abs(vector)) < _MAX_ABS_VALUE):
            raise UserError(f"record {record} of {path} holds values that are not word-vector "
                            f"numbers (not finite or > {_MAX_ABS_VALUE:g}): the file is corrupt "
                            f"or not a word2vec file ({_FORMAT_HINT})")
        if not np.all(np.isfinite(vector)):
            raise _not_finite(path, f"record {record}")
        yield word, vector if wanted(word) else None
