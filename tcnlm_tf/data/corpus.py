"""Reading corpora in the TDLM format.

The format (Lau et al. 2017, used unchanged by Wang et al. 2018 and by this project):
one document per line, sentences separated by a TAB, tokens separated by a space, already
tokenised and lower-cased. APNEWS, IMDB and BNC are distributed this way by the TDLM authors.

A document is a ``list[list[str]]`` (sentences of tokens); a corpus split is a list of
documents. Bad lines never crash the reader: each kind is skipped and counted in
:class:`ReadStats`, which the caller logs.
"""
from __future__ import annotations

import codecs
import dataclasses
import glob
import io
import os
import re
import shutil
import socket
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from tcnlm_tf.errors import UserError

#: this machine in the names of temporary files (letters, digits and hyphens only)
HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"

Document = list[list[str]]

FORMAT_DESCRIPTION = (
    "TDLM format: one document per line, sentences separated by a TAB, tokens by a space"
)


@dataclasses.dataclass
class ReadStats:
    """Counts of what the reader skipped in one file; ``first_bad_line`` helps users find it."""

    documents: int = 0
    sentences: int = 0
    tokens: int = 0
    empty_lines: int = 0            # blank lines: documents without a single token
    empty_sentences: int = 0
    undecodable_lines: int = 0
    lines_with_nul_bytes: int = 0   # NUL is no text (and no HDF5 string may hold one)
    overlong_documents: int = 0
    first_bad_line: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the line number (from 1) of each document kept, so per-line side files (TDLM's
    #: document labels and tags) can be aligned with the documents
    lines: list[int] = dataclasses.field(default_factory=list)

    def note(self, kind: str, line_number: int) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.first_bad_line.setdefault(kind, line_number)

    def problems(self, path: Path) -> list[str]:
        """One human-readable line per kind of skipped input, naming the first offending line."""
        lines = []
        for kind in ("empty_lines", "empty_sentences", "undecodable_lines",
                     "lines_with_nul_bytes", "overlong_documents"):
            count = getattr(self, kind)
            if count:
                first = self.first_bad_line[kind]
                lines.append(f"{path}: skipped {count} {kind.replace('_', ' ')} "
                             f"(first at line {first})")
        return lines


#: byte-order marks and the codecs that read (and drop) them; UTF-32's little-endian mark
#: begins with UTF-16's, so it comes first
_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
          (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
          (codecs.BOM_UTF16_BE, "utf-16"))


def marked_encoding(data: bytes) -> str | None:
    """The codec that a byte-order mark at the start of ``data`` declares (the codec drops
    the mark), or None without one."""
    return next((codec for mark, codec in _MARKS if data.startswith(mark)), None)


def decode_text(data: bytes, encoding: str = "utf-8", errors: str = "strict") -> str:
    """``data`` as text: in the encoding its byte-order mark declares, else ``encoding``; a
    mark never becomes part of the first word."""
    return data.decode(marked_encoding(data) or encoding, errors=errors)


def utf8_lines(path: Path) -> Iterator[bytes]:
    """The lines of a text file as UTF-8 bytes, without their line ends, read one at a time.
    LF, CRLF and a lone CR (classic Mac OS files) each end a line. A byte-order mark is
    honoured: a UTF-16 or UTF-32 file (a corpus an editor saved as "Unicode") is decoded as
    its mark says, and a UTF-8 mark is dropped instead of being glued to the first word."""
    with open(path, "rb") as handle:
        codec = marked_encoding(handle.read(4))
        handle.seek(0)
        if codec in ("utf-16", "utf-32"):
            yield from _wide_lines(path, handle, codec)
            return
        if codec == "utf-8-sig":
            handle.seek(len(codecs.BOM_UTF8))
        for raw in handle:
            yield from raw.rstrip(b"\r\n").split(b"\r")


def _wide_lines(path: Path, handle: BinaryIO, codec: str) -> Iterator[bytes]:
    """The lines of a UTF-16 or UTF-32 file (``handle`` at its start) as UTF-8 bytes."""
    text = io.TextIOWrapper(handle, encoding=codec, newline="")
    try:
        for line in text:
            yield line.rstrip("\r\n").encode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} starts with a {codec.upper()} byte-order mark but is not "
                        f"{codec.upper()} text: convert it to UTF-8 (iconv -f "
                        f"{codec.upper()} -t UTF-8)") from None
    finally:
        text.detach()


def parse_document(line: str) -> Document:
    """Split one corpus line into sentences of tokens, dropping empty sentences."""
    sentences = (sentence.split() for sentence in line.rstrip("\r\n").split("\t"))
    return [tokens for tokens in sentences if tokens]


def iter_corpus_file(path: Path, stats: ReadStats,
                     max_doc_tokens: int = 100_000) -> Iterator[tuple[int, Document]]:
    """The documents of one split file, one at a time, each with its line number (from 1);
    what is skipped is counted in ``stats`` (the streaming form of :func:`read_corpus_file`,
    which holds no more than one line).

    Lines are read by :func:`utf8_lines` (any line-end convention, byte-order marks
    honoured). Lines that are not valid UTF-8 or hold a NUL byte are skipped (not silently
    "repaired" into wrong tokens); documents longer than ``max_doc_tokens`` tokens are
    skipped. All are counted.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"corpus file not found: {path} (expected {FORMAT_DESCRIPTION})")
    for line_number, raw in enumerate(utf8_lines(path), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            stats.note("undecodable_lines", line_number)
            continue
        if "\x00" in line:
            stats.note("lines_with_nul_bytes", line_number)
            continue
        document = parse_document(line)
        if not document:
            stats.note("empty_lines", line_number)
            continue
        dropped = line.count("\t") + 1 - len(document)
        if dropped:
            stats.empty_sentences += dropped
            stats.first_bad_line.setdefault("empty_sentences", line_number)
        num_tokens = sum(len(sentence) for sentence in document)
        if num_tokens > max_doc_tokens:
            stats.note("overlong_documents", line_number)
            continue
        stats.documents += 1
        stats.sentences += len(document)
        stats.tokens += num_tokens
        yield line_number, document


def read_corpus_file(path: Path, max_doc_tokens: int = 100_000) -> tuple[list[Document], ReadStats]:
    """Read one split file whole (:func:`iter_corpus_file`); returns its documents and what
    was skipped, with each document's line number in ``stats.lines``."""
    documents: list[Document] = []
    stats = ReadStats()
    for line_number, document in iter_corpus_file(path, stats, max_doc_tokens):
        documents.append(document)
        stats.lines.append(line_number)
    return documents, stats


def format_document(document: Document) -> str:
    """One document as a TDLM-format line (without the newline)."""
    return "\t".join(" ".join(sentence) for sentence in document)


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(binary_file)`` on a temporary file beside ``path``, flush it to disk and
    rename it onto ``path``: an interrupted write never leaves a partial file behind, and
    the file that was there stays whole until the new one is complete. The temporary files
    of this target that killed processes left are removed first (:func:`remove_stale`).

    A failure to write raises the :class:`OSError` naming ``path`` (a full disk fails in
    ``write`` or ``fsync``, whose errors name no file), so that the one-line error of
    :func:`tcnlm_tf.errors.exit_on_user_error` says which file could not be written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path.parent, f"{path.name}.")
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if err.filename not in (None, str(tmp)):
            raise                       # another file's error (a copy's source, say)
        raise OSError(err.errno, err.strerror, str(path)) from err
    finally:
        tmp.unlink(missing_ok=True)


def atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` onto ``target`` with :func:`atomic_write`: a copy that fails (a full
    disk) leaves the old ``target`` whole, never a truncated one."""
    with open(source, "rb") as reader:
        atomic_write(target, lambda handle: shutil.copyfileobj(reader, handle))


def temporary_path(path: Path) -> Path:
    """Where a writer of ``path`` puts its work before renaming it onto ``path``:
    ``.<name>.<host>~<pid>.tmp`` beside it, naming the machine and process that write it
    (:func:`remove_stale`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{HOST}~{os.getpid()}.tmp")


def remove_stale(directory: Path, prefix: str = "") -> None:
    """Remove the temporary files and directories of :func:`temporary_path` in
    ``directory`` (``.<prefix>...<host>~<pid>.tmp``: :func:`atomic_write`'s, a prepared
    corpus's) of this machine whose process is gone: a killed writer leaves its own behind,
    and nothing else ever removes it. Another machine's are left alone (in a folder that
    several machines share, a live writer there is no process here); one of an earlier
    version, named ``<pid>`` only, counts as this machine's."""
    for stale in Path(directory).glob(f".{glob.escape(prefix)}*.tmp"):
        host, _, pid = stale.name.rsplit(".", 2)[-2].rpartition("~")
        if (host or HOST) != HOST or not pid.isdigit() or alive(int(pid)):
            continue
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, UTF-8 (JSON and tables a later run reads)."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a plot's PNG, an archive made in memory)."""
    atomic_write(path, lambda handle: handle.write(data))


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (newline added to each) to ``path`` atomically, UTF-8."""
    def write(handle: BinaryIO) -> None:
        for line in lines:
            handle.write(line.encode("utf-8") + b"\n")
    atomic_write(path, write)


def write_corpus_file(path: Path, documents: Iterable[Document]) -> None:
    """Write documents in the TDLM format, atomically."""
    write_lines(path, (format_document(document) for document in documents))
