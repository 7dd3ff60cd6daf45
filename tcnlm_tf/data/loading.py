"""From corpus files to cached integer arrays: :func:`load_corpus` is the one entry point.

Where the files are: ``<data_dir>/<dataset>/{train,valid,test}.txt`` for ``apnews``,
``imdb`` and ``bnc`` (``data_dir`` defaults to ``$TCNLM_DATA_DIR`` or ``./data``); the
``synthetic`` corpus is generated into ``<cache_dir>/synthetic-<key>/``.

What is cached: the vocabularies and, per split, every sentence as LM ids and as topic-model
ids, with sentence and document offsets (:class:`SplitArrays`). The cache is one HDF5 file
(``<cache_dir>/prepared/<dataset>-<key>.h5``) whose key is a SHA-256 of the source files'
bytes and of every setting that shapes the arrays; change either and it is rebuilt.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from tcnlm_tf.config import DATA_DIR_ENV, DataConfig, default_cache_dir
from tcnlm_tf.data import synthetic
from tcnlm_tf.data.corpus import FORMAT_DESCRIPTION, Document, read_corpus_file
from tcnlm_tf.data.vocab import (Vocabulary, build_lm_vocab, build_topic_vocab, load_stopwords,
                                 word_counts, EOS, PAD, UNK)
from tcnlm_tf.errors import UserError

SPLITS = ("train", "valid", "test")
#: bumped whenever the vocabularies or arrays built from the same files change (2: clitics
#: left the topic vocabulary; 3: documents' source line numbers; 4: a literal <pad> in the
#: text is <unk>; 5: lone CRs end lines and byte-order marks are honoured)
CACHE_FORMAT_VERSION = 5

CORPUS_SOURCES = {
    "apnews": "https://github.com/jhlau/topically-driven-language-model (APNEWS)",
    "imdb": "https://github.com/jhlau/topically-driven-language-model (IMDB)",
    "bnc": "https://github.com/jhlau/topically-driven-language-model (BNC)",
    "peoples_daily": "https://github.com/thunlp/SDLM-pytorch (LM/data/renmin_hownet)",
}


@dataclasses.dataclass
class SplitArrays:
    """One split as flat id arrays.

    Shapes (S sentences, D documents):
      ``lm_ids`` [sum of sentence lengths] LM ids (no ``<eos>``);
      ``sent_offsets`` [S+1]: sentence i is ``lm_ids[sent_offsets[i]:sent_offsets[i+1]]``;
      ``topic_ids`` [...] topic-vocabulary ids of each sentence's words that are in it;
      ``topic_offsets`` [S+1]: the same for ``topic_ids``;
      ``doc_offsets`` [D+1]: document j is sentences ``doc_offsets[j]:doc_offsets[j+1]``;
      ``doc_lines`` [D]: the source file's line number (from 1) of each document.
    """

    lm_ids: np.ndarray
    sent_offsets: np.ndarray
    topic_ids: np.ndarray
    topic_offsets: np.ndarray
    doc_offsets: np.ndarray
    doc_lines: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sent_offsets) - 1

    def num_predicted_tokens(self, line_end: str = "eos") -> int:
        """Words plus one ``<eos>`` per sentence (with ``line_end`` ``none``, stream mode
        only, just the words): what perplexity divides by."""
        return int(len(self.lm_ids) + (self.num_sentences if line_end == "eos" else 0))


@dataclasses.dataclass
class Corpus:
    """A prepared corpus: vocabularies, split arrays, and where it came from."""

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


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


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
        "stopwords": _file_digest(stopwords) if stopwords else None,
        "files": {split: _file_digest(directory / f"{split}.txt") for split in SPLITS},
    }
    return _digest(json.dumps(settings, sort_keys=True).encode())


def encode_split(documents: list[Document], lm_vocab: Vocabulary,
                 topic_vocab: Vocabulary, lines: list[int] | None = None) -> SplitArrays:
    """Turn documents into :class:`SplitArrays` (unknown LM words become ``<unk>``, and so
    does ``<pad>`` written in the text: its id marks padding, which no loss or perplexity
    counts, so the token would silently vanish); ``lines``: their source line numbers
    (default 1, 2, ...)."""
    lm_ids: list[int] = []
    topic_ids: list[int] = []
    sent_offsets = [0]
    topic_offsets = [0]
    doc_offsets = [0]
    unk = lm_vocab.unk_id
    lm_index = {**lm_vocab.index, PAD: unk}
    topic_index = topic_vocab.index
    for document in documents:
        for sentence in document:
            lm_ids.extend(lm_index.get(w, unk) for w in sentence)
            topic_ids.extend(topic_index[w] for w in sentence if w in topic_index)
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


def literal_notices(path: Path, documents: list[Document], lines: list[int]) -> list[str]:
    """One line per reserved word written in ``path``'s text: how often, the first source
    line (``lines``: each document's), and how it is read."""
    return [f"{path}: {count} literal {word} (first at line {lines[first - 1]}), read as "
            f"{LITERAL_MEANINGS[word]}"
            for word, (count, first) in literal_specials(documents).items()]


def literal_specials(documents: list[Document]) -> dict[str, tuple[int, int]]:
    """``{reserved word: (times written in the text, first document from 1)}``."""
    found: dict[str, tuple[int, int]] = {}
    for number, document in enumerate(documents, start=1):
        if LITERAL_MEANINGS.keys().isdisjoint(itertools.chain.from_iterable(document)):
            continue                                  # the common case, scanned in C
        for word in itertools.chain.from_iterable(document):
            if word in LITERAL_MEANINGS:
                count, first = found.get(word, (0, number))
                found[word] = (count + 1, first)
    return found


def _build(config: DataConfig, directory: Path, log: Callable[[str], None]) -> Corpus:
    documents, lines = {}, {}
    for split in SPLITS:
        path = directory / f"{split}.txt"
        documents[split], stats = read_corpus_file(path, config.max_doc_tokens)
        lines[split] = stats.lines
        for line in stats.problems(path):
            log(line)
        if not documents[split]:
            raise UserError(f"{path} holds no usable document ({FORMAT_DESCRIPTION})")
        for line in literal_notices(path, documents[split], stats.lines):
            log(line)
    counts, doc_counts = word_counts(documents["train"])
    lm_vocab = build_lm_vocab(counts, config.min_freq)
    topic_vocab = build_topic_vocab(
        lm_vocab, counts, doc_counts, load_stopwords(config.stopwords),
        min_docs=config.topic_min_docs, top_fraction=config.topic_top_fraction,
        top_among=config.topic_top_among)
    splits = {split: encode_split(documents[split], lm_vocab, topic_vocab, lines[split])
              for split in SPLITS}
    return Corpus(config.dataset, lm_vocab, topic_vocab, splits, directory, Path())


def _write_cache(corpus: Corpus, path: Path) -> None:
    """Write the cache under a name of this process's own, then rename it into place: two
    trainings that prepare the same corpus at once (``evaluate.compare --jobs 2``) must not
    open one temporary HDF5 file together (HDF5's file lock makes the second one fail)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    strings = h5py.string_dtype("utf-8")
    try:
        with h5py.File(tmp, "w") as h5:
            h5.create_dataset("lm_vocab", data=np.array(corpus.lm_vocab.words, dtype=object),
                              dtype=strings)
            h5.create_dataset("topic_vocab", data=np.array(corpus.topic_vocab.words, dtype=object),
                              dtype=strings)
            for split, arrays in corpus.splits.items():
                group = h5.create_group(split)
                for field in dataclasses.fields(SplitArrays):
                    group.create_dataset(field.name, data=getattr(arrays, field.name))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read_cache(path: Path, name: str, directory: Path) -> Corpus:
    with h5py.File(path, "r") as h5:
        lm_words = [w.decode() if isinstance(w, bytes) else w for w in h5["lm_vocab"][()]]
        topic_words = [w.decode() if isinstance(w, bytes) else w for w in h5["topic_vocab"][()]]
        splits = {split: SplitArrays(**{f.name: h5[split][f.name][()]
                                        for f in dataclasses.fields(SplitArrays)})
                  for split in SPLITS}
    return Corpus(name, Vocabulary(lm_words, unk=UNK), Vocabulary(topic_words), splits,
                  directory, path)


def load_corpus(config: DataConfig, cache_dir: Path | None = None,
                log: Callable[[str], None] = print) -> Corpus:
    """Prepared corpus for ``config``: read from the cache, or built and cached."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    directory = source_dir(config, cache_dir)
    path = cache_dir / "prepared" / f"{config.dataset}-{cache_key(config, directory)[:16]}.h5"
    if path.is_file():
        try:
            return _read_cache(path, config.dataset, directory)
        except (OSError, KeyError) as err:
            log(f"cache {path} is unreadable ({err}); rebuilding it")
    log(f"preparing {config.dataset} from {directory} (cached in {path})")
    corpus = _build(config, directory, log)
    _write_cache(corpus, path)
    corpus.cache_path = path
    return corpus
