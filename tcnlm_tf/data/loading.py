"""From corpus files to cached integer arrays: :func:`load_corpus` is the one entry point.

Where the files are: ``<data_dir>/<dataset>/{train,valid,test}.txt`` for ``apnews``,
``imdb`` and ``bnc`` (``data_dir`` defaults to ``$TCNLM_DATA_DIR`` or ``./data``); the
``synthetic`` corpus is generated into ``<cache_dir>/synthetic-<key>/``.

What is cached: the vocabularies and, per split, every sentence as LM ids and as topic-model
ids, with sentence and document offsets (:class:`SplitArrays`), in a directory of shards
(``<cache_dir>/prepared/<dataset>-<key>/``, :mod:`tcnlm_tf.data.shards`) whose key is a
SHA-256 of the source files' bytes and of every setting that shapes the arrays; change
either and it is rebuilt. The cache is built in two passes over the files, never holding
more than one shard: the training split's word and document counts (the vocabularies),
then every split encoded document by document into shards. A split is read back as memory
maps of its shards, so a corpus larger than memory trains.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from tcnlm_tf.config import DATA_DIR_ENV, DataConfig, default_cache_dir
from tcnlm_tf.data import shards, synthetic
from tcnlm_tf.data.shard_checks import CorruptShard, id_dtype
from tcnlm_tf.data.sharded_array import ShardedArray
from tcnlm_tf.data.corpus import (FORMAT_DESCRIPTION, Document, ReadStats, iter_corpus_file,
                                  remove_stale, temporary_path)
from tcnlm_tf.data.vocab import (Vocabulary, build_lm_vocab, build_topic_vocab, load_stopwords,
                                 word_counts, EOS, PAD, UNK)
from tcnlm_tf.errors import FILESYSTEM_ERRNOS, UserError

SPLITS = ("train", "valid", "test")
#: bumped whenever the vocabularies or arrays built from the same files change (2: clitics
#: left the topic vocabulary; 3: documents' source line numbers; 4: a literal <pad> in the
#: text is <unk>; 5: lone CRs end lines and byte-order marks are honoured; 6: a directory
#: of memory-mapped shards instead of one HDF5 file read whole)
CACHE_FORMAT_VERSION = 6

CORPUS_SOURCES = {
    "apnews": "https://github.com/jhlau/topically-driven-language-model (APNEWS)",
    "imdb": "https://github.com/jhlau/topically-driven-language-model (IMDB)",
    "bnc": "https://github.com/jhlau/topically-driven-language-model (BNC)",
    "peoples_daily": "https://github.com/thunlp/SDLM-pytorch (LM/data/renmin_hownet)",
}


@dataclasses.dataclass
class SplitArrays:
    """One split as flat id arrays: numpy arrays, or (a prepared corpus's splits)
    :class:`~tcnlm_tf.data.sharded_array.ShardedArray` memory maps of its shards, which index and
    slice alike.

    Shapes (S sentences, D documents):
      ``lm_ids`` [sum of sentence lengths] LM ids (no ``<eos>``);
      ``sent_offsets`` [S+1]: sentence i is ``lm_ids[sent_offsets[i]:sent_offsets[i+1]]``;
      ``topic_ids`` [...] topic-vocabulary ids of each sentence's words that are in it;
      ``topic_offsets`` [S+1]: the same for ``topic_ids``;
      ``doc_offsets`` [D+1]: document j is sentences ``doc_offsets[j]:doc_offsets[j+1]``;
      ``doc_lines`` [D]: the source file's line number (from 1) of each document;
      ``lm_counts`` [V'] int64 or None: how often each LM id occurs in ``lm_ids`` (V' at
      most the vocabulary, ids past it never occur), stored by the preparation so that no
      pass over ``lm_ids`` is needed for it; None: count them from ``lm_ids``.
    """

    lm_ids: np.ndarray
    sent_offsets: np.ndarray
    topic_ids: np.ndarray
    topic_offsets: np.ndarray
    doc_offsets: np.ndarray
    doc_lines: np.ndarray
    lm_counts: np.ndarray | None = None

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sent_offsets) - 1

    def release(self) -> None:
        """Drop the memory maps' pages that reads have mapped (see
        :meth:`~tcnlm_tf.data.sharded_array.ShardedArray.release`; nothing for arrays in memory)."""
        for value in vars(self).values():
            if isinstance(value, ShardedArray):
                value.release()

    def num_predicted_tokens(self, line_end: str = "eos") -> int:
        """Words plus one ``<eos>`` per sentence (with ``line_end`` ``none``, stream mode
        only, just the words): what perplexity divides by."""
        return int(len(self.lm_ids) + (self.num_sentences if line_end == "eos" else 0))


@dataclasses.dataclass
class Corpus:
    """A prepared corpus: vocabularies, split arrays, where it came from (``source_dir``)
    and where it is prepared (``cache_path``: the directory of its shards)."""

    name: str
    lm_vocab: Vocabulary
    topic_vocab: Vocabulary
    splits: dict[str, SplitArrays]
    source_dir: Path
    cache_path: Path


def source_dir(config: DataConfig, cache_dir: Path | None = None) -> Path:
    """The directory holding ``train.txt``/``valid.txt``/``test.txt`` for ``config.dataset``,
    generating the synthetic corpus first if needed. Missing real corpora raise UserError."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if config.dataset == "synthetic":
        syn = synthetic.SyntheticConfig.from_dict(config.synthetic)
        key = _digest(json.dumps(syn.to_dict(), sort_keys=True).encode())[:12]
        with _cache_writes(cache_dir / f"synthetic-{key}", cache_dir):
            return synthetic.write_corpus(cache_dir / f"synthetic-{key}", syn)
    directory = Path(config.data_dir) / config.dataset
    source = (f"get it from {CORPUS_SOURCES[config.dataset]}" if config.dataset in CORPUS_SOURCES
              else "make it with `python -m train.prepare --input RAW --output "
              f"DIR/{config.dataset}`")
    for split in SPLITS:
        path = directory / f"{split}.txt"
        if not path.is_file():
            held = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else None
            found = "" if held is None else (
                f"; {directory} holds {', '.join(held[:5]) or 'nothing'}"
                + (f" and {len(held) - 5} more" if len(held) > 5 else ""))
            raise UserError(
                f"{config.dataset} corpus not found: expected {path} ({FORMAT_DESCRIPTION})"
                f"{found}; {source} and pass --data-dir DIR (or set TCNLM_DATA_DIR) so "
                f"that DIR/{config.dataset}/{split}.txt exists")
        if not holds_text(path):
            raise UserError(f"{path} holds no text: every split of a corpus needs at least "
                            f"one document ({FORMAT_DESCRIPTION}); {source}")
    return directory


def holds_text(path: Path) -> bool:
    """Whether the file has a line that is not blank (read until the first one)."""
    with open(path, "rb") as lines:
        return any(line.strip() for line in lines)


def corpus_location(config: DataConfig, given: str | Path | None = None) -> str:
    """Where a run's corpus is now: ``given`` (a ``--data-dir`` of this command, resolved),
    else the run's own ``data_dir`` when it holds the corpus, else ``$TCNLM_DATA_DIR`` when
    that does, else the run's own (whose absence :func:`source_dir` then reports). Runs
    store their ``data_dir`` absolute; those of earlier versions stored it as given, which
    resolves against the working directory."""
    if given is not None:
        return str(Path(given).expanduser().resolve())
    if config.dataset == "synthetic":
        return config.data_dir
    holds = lambda d: (Path(d) / config.dataset / "train.txt").is_file()   # noqa: E731
    environment = os.environ.get(DATA_DIR_ENV)
    if not holds(config.data_dir) and environment and holds(environment):
        return str(Path(environment).resolve())
    return config.data_dir


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(config: DataConfig, directory: Path) -> str:
    """SHA-256 over the source files' contents and the settings that shape the arrays."""
    stopwords = Path(config.stopwords) if config.stopwords else None
    if stopwords is not None and not stopwords.is_file():   # never the default list instead
        raise UserError(f"stop-word list not found: {stopwords} (--stopwords: one word per "
                        "line)")
    settings = {
        "version": CACHE_FORMAT_VERSION,
        "min_freq": config.min_freq,
        "topic_min_docs": config.topic_min_docs,
        "topic_top_fraction": config.topic_top_fraction,
        "topic_top_among": config.topic_top_among,
        "max_doc_tokens": config.max_doc_tokens,
        "stopwords": shards.file_digest(stopwords) if stopwords else None,
        "files": {split: shards.file_digest(directory / f"{split}.txt") for split in SPLITS},
    }
    return _digest(json.dumps(settings, sort_keys=True).encode())


class Encoder:
    """Documents to ids: LM ids (unknown words become ``<unk>``, and so does ``<pad>``
    written in the text: its id marks padding, which no loss or perplexity counts, so the
    token would silently vanish) and the topic-vocabulary ids of the words that have one."""

    def __init__(self, lm_vocab: Vocabulary, topic_vocab: Vocabulary):
        self.unk = lm_vocab.unk_id
        self.lm_index = {**lm_vocab.index, PAD: self.unk}
        self.topic_index = topic_vocab.index

    def sentence(self, sentence: list[str]) -> tuple[list[int], list[int]]:
        """One sentence's LM ids and topic-vocabulary ids."""
        lm, topic, unk = self.lm_index, self.topic_index, self.unk
        return ([lm.get(w, unk) for w in sentence],
                [topic[w] for w in sentence if w in topic])


def encode_split(documents: list[Document], lm_vocab: Vocabulary,
                 topic_vocab: Vocabulary, lines: list[int] | None = None) -> SplitArrays:
    """Turn documents held in memory (a text to score) into :class:`SplitArrays`
    (:class:`Encoder`); ``lines``: their source line numbers (default 1, 2, ...)."""
    encoder = Encoder(lm_vocab, topic_vocab)
    lm_ids: list[int] = []
    topic_ids: list[int] = []
    sent_offsets = [0]
    topic_offsets = [0]
    doc_offsets = [0]
    for document in documents:
        for sentence in document:
            words, topic = encoder.sentence(sentence)
            lm_ids.extend(words)
            topic_ids.extend(topic)
            sent_offsets.append(len(lm_ids))
            topic_offsets.append(len(topic_ids))
        doc_offsets.append(len(sent_offsets) - 1)
    return SplitArrays(
        lm_ids=np.asarray(lm_ids, dtype=np.int32),
        sent_offsets=np.asarray(sent_offsets, dtype=np.int64),
        topic_ids=np.asarray(topic_ids, dtype=np.int32),
        topic_offsets=np.asarray(topic_offsets, dtype=np.int64),
        doc_offsets=np.asarray(doc_offsets, dtype=np.int64),
        doc_lines=np.asarray(lines if lines is not None else range(1, len(documents) + 1),
                             dtype=np.int64),
    )


#: how a reserved word of the LM vocabulary written in the text is read (see encode_split)
LITERAL_MEANINGS = {
    UNK: "the unknown word, as PTB-style files write it",
    EOS: "the end-of-sentence symbol; every sentence also gets its own <eos>, so a file "
         "that already ends its sentences with one scores each end twice: remove them",
    PAD: "<unk> (the <pad> id marks padding, which no loss counts)",
}


class LiteralCounter:
    """Counts the reserved words written in a file's text, one document at a time."""

    def __init__(self):
        #: {reserved word: (times written, first source line)}
        self.found: dict[str, tuple[int, int]] = {}

    def add(self, line: int, document: Document) -> None:
        """One document (from source ``line``)."""
        if LITERAL_MEANINGS.keys().isdisjoint(itertools.chain.from_iterable(document)):
            return                                    # the common case, scanned in C
        for word in itertools.chain.from_iterable(document):
            if word in LITERAL_MEANINGS:
                count, first = self.found.get(word, (0, line))
                self.found[word] = (count + 1, first)

    def notices(self, path: Path) -> list[str]:
        """One line per reserved word found: how often, the first line, how it is read."""
        return [f"{path}: {count} literal {word} (first at line {first}), read as "
                f"{LITERAL_MEANINGS[word]}" for word, (count, first) in self.found.items()]


def _documents(path: Path, config: DataConfig, log: Callable[[str], None],
               stats: ReadStats | None = None):
    """The documents of the split file ``path`` (line, document), one at a time; at the end,
    the reader's problems are logged and an empty split is an error."""
    stats = stats if stats is not None else ReadStats()
    yield from iter_corpus_file(path, stats, config.max_doc_tokens)
    for line in stats.problems(path):
        log(line)
    if not stats.documents:
        raise UserError(f"{path} holds no usable document ({FORMAT_DESCRIPTION})")


def _vocabularies(config: DataConfig, directory: Path, log: Callable[[str], None]
                  ) -> tuple[Vocabulary, Vocabulary]:
    """The first pass: the training split's word and document counts, and the LM and
    topic-model vocabularies built from them (memory: the word types, not the text)."""
    stats, path = ReadStats(), directory / "train.txt"
    documents = (document for _, document in
                 _documents(path, config, lambda line: None, stats))
    counts, doc_counts = word_counts(documents)
    lm_vocab = build_lm_vocab(counts, config.min_freq, source=_what_was_read(path, stats))
    topic_vocab = build_topic_vocab(
        lm_vocab, counts, doc_counts, load_stopwords(config.stopwords),
        min_docs=config.topic_min_docs, top_fraction=config.topic_top_fraction,
        top_among=config.topic_top_among)
    return lm_vocab, topic_vocab


def _what_was_read(path: Path, stats: ReadStats) -> str:
    """``path`` and how much of it was read, as an error about its words names the file: a
    file of random bytes reads as a few short lines, its other lines skipped as not text."""
    skipped = stats.undecodable_lines + stats.lines_with_nul_bytes
    return (f"{path} (read: {stats.documents} document(s), {stats.tokens} words"
            + (f"; {skipped} lines skipped as not text: is it the corpus's text?"
               if skipped else "") + ")")


def _encode_splits(config: DataConfig, directory: Path, target: Path, lm_vocab: Vocabulary,
                   topic_vocab: Vocabulary, shard_words: int,
                   log: Callable[[str], None]) -> dict:
    """The second pass: every split encoded document by document into shards under
    ``target``; their manifest entries."""
    encoder = Encoder(lm_vocab, topic_vocab)
    lm_dtype, topic_dtype = id_dtype(len(lm_vocab)), id_dtype(len(topic_vocab))
    entries = {}
    for split in SPLITS:
        path = directory / f"{split}.txt"
        writer = shards.ShardWriter(target, split, lm_dtype, topic_dtype, shard_words)
        literals = LiteralCounter()
        for line, document in _documents(path, config, log):
            literals.add(line, document)
            encoded = [encoder.sentence(sentence) for sentence in document]
            writer.add(line, [words for words, _ in encoded], [topic for _, topic in encoded])
        for line in literals.notices(path):
            log(line)
        entries[split] = writer.close()
        log(f"  {split}: {entries[split]['documents']} documents, "
            f"{entries[split]['words']} words in {len(entries[split]['shards'])} shard(s)")
    return entries


def _prepare(config: DataConfig, directory: Path, target: Path, key: str, shard_words: int,
             log: Callable[[str], None]) -> None:
    """Build the prepared corpus (two passes over the files) in a directory of this
    process's own and rename it to ``target`` once complete, manifest last: an interrupted
    preparation leaves nothing that looks complete (the next one starts again). Two
    processes that prepare the same corpus at once (``evaluate.compare --jobs 2``) each
    build their own, and the first to finish wins."""
    tmp = temporary_path(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        lm_vocab, topic_vocab = _vocabularies(config, directory, log)
        vocabularies = {"lm": lm_vocab, "topic": topic_vocab}
        for what, vocabulary in vocabularies.items():
            vocabulary.save(tmp / shards.VOCABULARIES[what])
        entries = _encode_splits(config, directory, tmp, lm_vocab, topic_vocab, shard_words,
                                 log)
        shards.write_manifest(tmp, {"format": shards.SHARD_FORMAT, "key": key,
                                    "dataset": config.dataset, "splits": entries,
                                    "vocabularies": shards.vocabulary_entries(tmp, vocabularies)})
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / shards.MANIFEST).is_file():
                raise                  # not another process's complete copy in the way
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_prepared(directory: Path, name: str, source: Path, key: str,
                  verify: bool = True) -> Corpus:
    """The prepared corpus in ``directory`` (cache ``key``): vocabularies, and each split's
    arrays as memory maps of its shards. With ``verify``, every file is checked against the
    manifest and every shard's contents against the vocabularies
    (:func:`tcnlm_tf.data.shards.open_split`); a :class:`~tcnlm_tf.data.shard_checks.CorruptShard`
    names the first file found wrong."""
    manifest = shards.read_manifest(directory, key)
    lm_vocab = shards.open_vocabulary(directory, manifest, "lm", verify, unk=UNK)
    topic_vocab = shards.open_vocabulary(directory, manifest, "topic", verify)
    sizes = (len(lm_vocab), len(topic_vocab))
    splits = {split: _open_split(directory, manifest, split, sizes, verify) for split in SPLITS}
    return Corpus(name, lm_vocab, topic_vocab, splits, source, directory)


def _open_split(directory: Path, manifest: dict, split: str, vocab_sizes: tuple[int, int],
                verify: bool) -> SplitArrays:
    """One split of a prepared corpus as :class:`SplitArrays` of its shards' memory maps."""
    entry = shards.split_entry(directory, manifest, split)
    opened, counts = shards.open_split(directory, entry, split, vocab_sizes, verify)
    pieces = {field: [arrays[field] for arrays in opened]
              for field in shards.ID_FIELDS + shards.OFFSET_FIELDS}
    tails = {"sent_offsets": entry["words"], "topic_offsets": entry["topic_words"],
             "doc_offsets": entry["sentences"]}
    return SplitArrays(
        **{field: ShardedArray(pieces[field], tails.get(field),
                                      np.int64 if field in shards.OFFSET_FIELDS else None)
           for field in pieces},
        lm_counts=counts)


def load_corpus(config: DataConfig, cache_dir: Path | None = None,
                log: Callable[[str], None] = print,
                shard_words: int = shards.DEFAULT_SHARD_WORDS) -> Corpus:
    """Prepared corpus for ``config``: opened from the cache, or prepared into it first
    (in shards of about ``shard_words`` words). A damaged cache is reported (one line) and
    prepared again."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    directory = source_dir(config, cache_dir)
    key = cache_key(config, directory)
    target = cache_dir / "prepared" / f"{config.dataset}-{key[:16]}"
    with _cache_writes(target, cache_dir):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target.parent)
    if (target / shards.MANIFEST).is_file():
        try:
            return open_prepared(target, config.dataset, directory, key)
        except CorruptShard as err:
            log(f"{err}: preparing it again")
            shutil.rmtree(target, ignore_errors=True)
    elif target.exists():
        shutil.rmtree(target, ignore_errors=True)        # no manifest: never completed
    log(f"preparing {config.dataset} from {directory} (cached in {target})")
    with _cache_writes(target, cache_dir):
        _prepare(config, directory, target, key, shard_words, log)
    return open_prepared(target, config.dataset, directory, key, verify=False)


@contextlib.contextmanager
def _cache_writes(target: Path, cache_dir: Path) -> Iterator[None]:
    """Report a failure to write ``target`` in the corpus cache ``cache_dir`` (a prepared
    corpus, the generated synthetic corpus) on a full disk or a read-only ``--cache-dir`` as
    one line naming the file and ``--cache-dir``, the flag that moves the cache, instead of
    the generic message about the run's own directories. An error of a file outside the
    cache (a corpus file being read) passes through."""
    try:
        yield
    except OSError as err:
        cache, failed = Path(cache_dir), Path(err.filename or cache_dir)
        if err.errno not in FILESYSTEM_ERRNOS or not (failed.is_relative_to(cache)
                                                      or cache.is_relative_to(failed)):
            raise
        where = Path(err.filename).name if err.filename else target.name
        raise UserError(f"cannot write the corpus cache {target} ({where}: {err.strerror}); "
                        "free space or fix the permissions there, or give another "
                        "--cache-dir") from None
