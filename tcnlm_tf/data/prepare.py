"""Turn raw text into the project's corpus format (the TDLM format).

Output format: one document per line, sentences separated by a TAB, tokens separated by a
single space, everything lower-cased. Split mode writes ``train.txt``, ``valid.txt`` and
``test.txt`` into the output directory; ``split=None`` writes every document to one file.

Pipeline
--------
1. **Read** (:func:`read_raw_documents`). The input is a text file or a directory searched
   recursively for files matching a glob (default ``*.txt``), in sorted path order. A file is
   either one document, or (``one_per_line``) one document per line; a single input file is
   one-per-line unless told otherwise. Bytes that do not decode are replaced with U+FFFD and
   counted (files, or lines in one-per-line mode); files that cannot be read are counted and
   skipped; blank lines and empty files are counted and skipped. Files inside the output
   directory are never read, so re-running into a sub-directory of the input is safe.
2. **Sentence splitting** (:func:`train_sentence_splitter`): an NLTK Punkt model *trained on
   the corpus itself* (no pretrained model, nothing downloaded), so it learns the corpus's
   abbreviations ("Mr.", "U.S.") instead of splitting after them. A TAB or a blank line in
   the raw text always ends a sentence, so text that is already sentence-split keeps its
   boundaries.
3. **Word tokens** (:func:`tokenize_sentence`): NLTK's Treebank-style ``NLTKWordTokenizer``
   ("don't" -> "do n't", punctuation split off), lower-cased. Sentences left with no token
   are dropped and counted. Documents longer than ``max_doc_tokens`` are *truncated* to
   their first ``max_doc_tokens`` tokens (and counted); documents with no token are skipped.
4. **Split** (:func:`assign_splits`): a shuffle seeded by ``seed`` assigns documents to
   train/valid/test by the given fractions; each split keeps the input's document order.
5. **Write** (:func:`tcnlm_tf.data.corpus.write_lines`): each file is written to a temporary
   file in the output directory and renamed into place. Existing output files are only replaced with
   ``force=True``.

Everything a user can get wrong (missing input, no usable documents, bad fractions, output
files in the way) raises :class:`tcnlm_tf.errors.UserError`. The whole corpus is held in
memory (raw text, then one output line per document), because Punkt is trained on all of it
before any document is split.
"""

from __future__ import annotations

import codecs
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from nltk.tokenize import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

from tcnlm_tf.data.corpus import decode_text, format_document, write_lines
from tcnlm_tf.errors import UserError

SPLIT_NAMES = ("train", "valid", "test")
DEFAULT_SPLIT = (0.8, 0.1, 0.1)
DEFAULT_GLOB = "*.txt"
DEFAULT_ENCODING = "utf-8-sig"
DEFAULT_MAX_DOC_TOKENS = 100_000
DEFAULT_OUTPUT_NAME = "all.txt"
PROGRESS_EVERY = 10_000

# Undecodable bytes are first decoded to this lone surrogate (which no codec produces from
# valid input), so they can be counted per line before being shown as U+FFFD.
_UNDECODABLE_MARK = "\udcff"
_MARK_ERRORS = "tcnlm_tf.data.prepare.mark_undecodable"
codecs.register_error(_MARK_ERRORS, lambda err: (_UNDECODABLE_MARK, err.end))

_HARD_BREAK = re.compile(r"\t|\n[^\S\n]*\n")
_WORD_TOKENIZER = NLTKWordTokenizer()


def _log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class RawCorpus:
    """Documents read from the input, with what had to be skipped or repaired on the way."""

    documents: list[str] = field(default_factory=list)
    files: int = 0
    undecodable: int = 0  # files (one document per file) or lines (one per line) repaired
    unreadable_files: int = 0
    empty_documents: int = 0


@dataclass
class SplitSummary:
    """One written corpus file and its size."""

    path: Path
    documents: int
    sentences: int
    tokens: int


@dataclass
class PrepareSummary:
    """What :func:`prepare_corpus` read, skipped, repaired and wrote."""

    input_path: Path
    files: int
    documents_read: int
    undecodable: int
    unreadable_files: int
    empty_documents: int
    truncated_documents: int
    empty_sentences: int
    max_doc_tokens: int
    outputs: list[SplitSummary]

    def report(self) -> str:
        """A few human-readable lines: input, problems handled, and the files written."""
        lines = [
            f"read {self.documents_read} documents from {self.files} file(s) under "
            f"{self.input_path}",
            f"skipped {self.empty_documents} empty document(s), {self.unreadable_files} "
            "unreadable file(s); "
            f"replaced undecodable bytes in {self.undecodable} file(s)/line(s); "
            f"truncated {self.truncated_documents} document(s) to {self.max_doc_tokens} tokens; "
            f"dropped {self.empty_sentences} empty sentence(s)",
        ]
        directory = self.outputs[0].path.parent
        lines.append(f"wrote {len(self.outputs)} file(s) to {directory}:")
        lines.extend(
            f"  {out.path.name}: {out.documents} documents, {out.sentences} sentences, "
            f"{out.tokens} tokens"
            for out in self.outputs
        )
        return "\n".join(lines)


@dataclass
class _Document:
    """One prepared document: its output line and its size."""

    line: str
    sentences: int
    tokens: int


def parse_fractions(text: str) -> tuple[float, float, float]:
    """Parse ``"0.8,0.1,0.1"`` into validated train/valid/test fractions."""
    try:
        fractions = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"--split {text!r}: expected three numbers like 0.8,0.1,0.1") from None
    return validate_fractions(fractions)


def validate_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Check there are three positive fractions summing to 1; return them as a tuple."""
    shown = ",".join(f"{f:g}" for f in fractions)
    if len(fractions) != len(SPLIT_NAMES):
        raise UserError(
            f"split {shown}: expected three fractions (train,valid,test) like 0.8,0.1,0.1"
        )
    if any(not f > 0 for f in fractions):
        raise UserError(
            f"split {shown}: every fraction must be positive (use --no-split for one file)"
        )
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise UserError(f"split {shown}: fractions must sum to 1, they sum to {sum(fractions):g}")
    return tuple(float(f) for f in fractions)  # type: ignore[return-value]


def _list_input_files(root: Path, pattern: str, exclude: Path | None) -> list[Path]:
    """Files under ``root`` matching ``pattern``, recursively, sorted, outside ``exclude``."""
    files = [
        path
        for path in root.rglob(pattern)
        if path.is_file() and (exclude is None or not path.resolve().is_relative_to(exclude))
    ]
    return sorted(files, key=lambda path: path.relative_to(root).as_posix())


def _decode(data: bytes, encoding: str) -> str:
    """Decode with undecodable bytes marked by :data:`_UNDECODABLE_MARK`; a file that starts
    with a byte-order mark is read as the mark says (:func:`tcnlm_tf.data.corpus.decode_text`)."""
    try:
        return decode_text(data, encoding, errors=_MARK_ERRORS)
    except LookupError:
        raise UserError(
            f"--encoding {encoding!r}: unknown text encoding (try utf-8 or latin-1)"
        ) from None


def _lines(text: str) -> list[str]:
    """Lines of ``text`` split at LF, CRLF or a lone CR (classic Mac OS files), as
    :func:`tcnlm_tf.data.corpus.utf8_lines` splits them; form feeds and U+2028 stay inside a
    line."""
    lines = re.split(r"\r\n?|\n", text)
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def _add_document(corpus: RawCorpus, text: str) -> None:
    """Append one raw document, counting repaired bytes and skipping empty text; NUL bytes
    (no text, e.g. from UTF-16 read as UTF-8) separate tokens like spaces."""
    if _UNDECODABLE_MARK in text:
        corpus.undecodable += 1
        text = text.replace(_UNDECODABLE_MARK, "\ufffd")
    text = text.replace("\x00", " ")
    if text.strip():
        corpus.documents.append(text)
    else:
        corpus.empty_documents += 1


def read_raw_documents(
    path: str | Path,
    *,
    one_per_line: bool | None = None,
    glob: str = DEFAULT_GLOB,
    encoding: str = DEFAULT_ENCODING,
    exclude: str | Path | None = None,
) -> RawCorpus:
    """Read raw documents from a file or a directory (see the module docstring, step 1).

    ``one_per_line=None`` means: one document per line for a single input file, one document
    per file for a directory. Files under ``exclude`` (the output directory) are skipped.
    """
    root = Path(path)
    if root.is_file():
        files = [root]
        one_per_line = True if one_per_line is None else one_per_line
    elif root.is_dir():
        files = _list_input_files(root, glob, Path(exclude).resolve() if exclude else None)
        if not files:
            raise UserError(
                f"input directory {root} has no files matching {glob!r} (choose others with --glob)"
            )
    else:
        raise UserError(
            f"input {root} not found: expected a text file or a directory of text files"
        )
    corpus = RawCorpus()
    for file in files:
        try:
            text = _decode(file.read_bytes(), encoding)
        except OSError:
            corpus.unreadable_files += 1
            continue
        corpus.files += 1
        for document in _lines(text) if one_per_line else [text]:
            _add_document(corpus, document)
    return corpus


def _segments(text: str) -> list[str]:
    """Pieces of ``text`` between hard sentence breaks (TABs, blank lines), non-blank only."""
    return [segment for segment in _HARD_BREAK.split(text) if segment.strip()]


def train_sentence_splitter(
    texts: Iterable[str], log: Callable[[str], None] | None = None
) -> PunktSentenceTokenizer:
    """Train a Punkt sentence splitter on ``texts`` (the corpus itself) and return it."""
    trainer = PunktTrainer()
    count = 0
    for count, text in enumerate(texts, start=1):
        for segment in _segments(text):
            trainer.train(segment, finalize=False)
        if log and count % PROGRESS_EVERY == 0:
            log(f"sentence splitter: trained on {count} documents")
    trainer.finalize_training()
    return PunktSentenceTokenizer(trainer.get_params())


def split_sentences(text: str, splitter: PunktSentenceTokenizer) -> list[str]:
    """Sentences of ``text``: Punkt's splits within each piece between hard breaks."""
    return [sentence for segment in _segments(text) for sentence in splitter.tokenize(segment)]


def tokenize_sentence(sentence: str) -> list[str]:
    """Lower-cased Treebank-style tokens of one sentence; no token contains whitespace."""
    return [part for token in _WORD_TOKENIZER.tokenize(sentence) for part in token.lower().split()]


def tokenize_document(
    text: str, splitter: PunktSentenceTokenizer, counts: Counter[str] | None = None
) -> list[list[str]]:
    """The document as a list of sentences, each a non-empty list of tokens.

    Sentences with no token are dropped; ``counts["empty_sentences"]`` counts them when a
    counter is given.
    """
    sentences = [tokenize_sentence(sentence) for sentence in split_sentences(text, splitter)]
    kept = [tokens for tokens in sentences if tokens]
    if counts is not None:
        counts["empty_sentences"] += len(sentences) - len(kept)
    return kept


def truncate_document(sentences: list[list[str]], max_tokens: int) -> list[list[str]]:
    """The document's first ``max_tokens`` tokens, keeping sentence boundaries."""
    kept: list[list[str]] = []
    budget = max_tokens
    for tokens in sentences:
        if budget <= 0:
            break
        kept.append(tokens[:budget])
        budget -= len(kept[-1])
    return kept


def assign_splits(num_documents: int, fractions: Sequence[float], seed: int) -> list[list[int]]:
    """Document indices for train/valid/test: a seeded shuffle cut by ``fractions``.

    Valid and test get ``round(n * fraction)`` documents, at least one each; train gets the
    rest and must get at least one. Indices within each split are in ascending order.
    """
    fractions = validate_fractions(fractions)
    sizes = [max(1, round(num_documents * f)) for f in fractions[1:]]
    if num_documents - sum(sizes) < 1:
        raise UserError(
            f"only {num_documents} usable document(s): too few to split into train/valid/test "
            "(add documents or use --no-split)"
        )
    order = list(range(num_documents))
    random.Random(seed).shuffle(order)
    cuts = [num_documents - sum(sizes), num_documents - sizes[1], num_documents]
    starts = [0, *cuts[:-1]]
    return [sorted(order[start:end]) for start, end in zip(starts, cuts)]


def _output_paths(
    output_dir: Path, split: Sequence[float] | None, output_name: str, force: bool
) -> list[Path]:
    """Output file paths; refuses (UserError) a bad name or existing files without ``force``."""
    if split is None and (not output_name or Path(output_name).name != output_name):
        raise UserError(
            f"--output-name {output_name!r}: expected a plain file name such as train.txt"
        )
    if output_dir.exists() and not output_dir.is_dir():
        raise UserError(
            f"output {output_dir} exists and is not a directory: expected a directory to write into"
        )
    names = [output_name] if split is None else [f"{name}.txt" for name in SPLIT_NAMES]
    paths = [output_dir / name for name in names]
    existing = [path.name for path in paths if path.exists()]
    if existing and not force:
        raise UserError(f"{', '.join(existing)} already in {output_dir}; pass --force to overwrite")
    return paths


def _prepare_documents(
    texts: list[str],
    splitter: PunktSentenceTokenizer,
    max_doc_tokens: int,
    log: Callable[[str], None] | None,
) -> tuple[list[_Document], Counter[str]]:
    """Tokenize every text into an output line; count empty, truncated and dropped items."""
    counts: Counter[str] = Counter()
    documents: list[_Document] = []
    for index, text in enumerate(texts, start=1):
        kept = tokenize_document(text, splitter, counts)
        num_tokens = sum(map(len, kept))
        if num_tokens > max_doc_tokens:
            counts["truncated_documents"] += 1
            kept = truncate_document(kept, max_doc_tokens)
            num_tokens = max_doc_tokens
        if not kept:
            counts["empty_documents"] += 1
        else:
            line = format_document(kept)
            documents.append(_Document(line, len(kept), num_tokens))
        if log and index % PROGRESS_EVERY == 0:
            log(f"tokenized {index}/{len(texts)} documents")
    return documents, counts


def _require_documents(documents: Sequence[object], input_path: Path, raw: RawCorpus) -> None:
    """Raise a UserError when no usable document is left."""
    if not documents:
        raise UserError(
            f"input {input_path} has no usable documents ({raw.files} file(s) read, "
            f"{raw.unreadable_files} unreadable): expected non-empty text"
        )


def prepare_corpus(
    input_path: str | Path,
    output_dir: str | Path,
    *,
    one_per_line: bool | None = None,
    glob: str = DEFAULT_GLOB,
    encoding: str = DEFAULT_ENCODING,
    split: Sequence[float] | None = DEFAULT_SPLIT,
    seed: int = 0,
    output_name: str = DEFAULT_OUTPUT_NAME,
    max_doc_tokens: int = DEFAULT_MAX_DOC_TOKENS,
    force: bool = False,
    log: Callable[[str], None] | None = _log_to_stderr,
) -> PrepareSummary:
    """Run the whole pipeline (module docstring) and return what was read and written.

    ``split=None`` writes every document to ``output_dir / output_name``; otherwise the
    train/valid/test fractions are used with ``seed``. ``log`` receives progress lines
    (``None`` for silence).
    """
    input_path, output_dir = Path(input_path), Path(output_dir)
    if max_doc_tokens < 1:
        raise UserError(f"--max-doc-tokens {max_doc_tokens}: expected a positive number of tokens")
    if split is not None:
        split = validate_fractions(split)
    paths = _output_paths(output_dir, split, output_name, force)
    raw = read_raw_documents(
        input_path, one_per_line=one_per_line, glob=glob, encoding=encoding, exclude=output_dir
    )
    _require_documents(raw.documents, input_path, raw)
    if log:
        log(
            f"read {len(raw.documents)} documents from {raw.files} file(s); "
            "training sentence splitter"
        )
    splitter = train_sentence_splitter(raw.documents, log)
    documents, counts = _prepare_documents(raw.documents, splitter, max_doc_tokens, log)
    _require_documents(documents, input_path, raw)
    groups = (
        [list(range(len(documents)))]
        if split is None
        else assign_splits(len(documents), split, seed)
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    outputs = []
    for path, indices in zip(paths, groups):
        chosen = [documents[i] for i in indices]
        write_lines(path, (doc.line for doc in chosen))
        outputs.append(
            SplitSummary(
                path, len(chosen), sum(d.sentences for d in chosen), sum(d.tokens for d in chosen)
            )
        )
    return PrepareSummary(
        input_path=input_path,
        files=raw.files,
        documents_read=len(raw.documents),
        undecodable=raw.undecodable,
        unreadable_files=raw.unreadable_files,
        empty_documents=raw.empty_documents + counts["empty_documents"],
        truncated_documents=counts["truncated_documents"],
        empty_sentences=counts["empty_sentences"],
        max_doc_tokens=max_doc_tokens,
        outputs=outputs,
    )
