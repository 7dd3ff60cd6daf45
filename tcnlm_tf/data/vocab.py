"""Vocabularies for the language model and the topic model, built as in the papers.

* LM vocabulary (Wang et al. 2018 §5, Lau et al. 2017 §4): training-split words with
  frequency >= ``min_freq`` (10 in the papers), sorted by decreasing frequency (adaptive
  softmax relies on this order), after three special tokens: padding (id 0), ``<unk>``,
  ``<eos>``.
* Topic-model vocabulary: the LM vocabulary's words minus stop words, minus the 0.1 % most
  frequent word types, minus words that occur in fewer than ``min_docs`` training documents
  (100 in the papers), minus tokens without a letter (punctuation, "$", numbers: the papers'
  stop-word list does not remove them, and on APNEWS "$", "(" and ":" would otherwise be
  among the most frequent topic words), minus the clitics the Treebank tokenizer splits off
  ("'s", "n't", "'re", "'ll", "'ve", "'d", "'m": on APNEWS they otherwise fill many
  topics' top words). Id 0 is padding; there is no ``<unk>``:
  out-of-vocabulary words are simply absent from a bag of words.
"""
from __future__ import annotations

import collections
import functools
import hashlib
import math
from pathlib import Path
from typing import Iterable, Sequence

from tcnlm_tf.data.corpus import Document, decode_text, write_lines
from tcnlm_tf.errors import UserError

PAD = "<pad>"
UNK = "<unk>"
EOS = "<eos>"
LM_SPECIALS = (PAD, UNK, EOS)
TOPIC_SPECIALS = (PAD,)

DEFAULT_STOPWORDS = Path(__file__).resolve().parent / "resources" / "stopwords_en.txt"


class Vocabulary:
    """A word <-> id mapping; ``words[i]`` is the word with id ``i``."""

    def __init__(self, words: Sequence[str], unk: str | None = None):
        self.words = list(words)
        self.index = {word: i for i, word in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("vocabulary words must be unique")
        self.unk_id = self.index[unk] if unk is not None else None

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def id(self, word: str) -> int | None:
        """The word's id, ``<unk>``'s id for unknown words, or None without an ``<unk>``."""
        return self.index.get(word, self.unk_id)

    def save(self, path: Path) -> None:
        """One word per line, written atomically (a reader never sees half a file)."""
        write_lines(path, self.words)

    def digest(self) -> str:
        """The SHA-256 (hex) of the words in their order, as :meth:`save` writes them (one
        UTF-8 line each): ``sha256sum`` of the saved file. A run keeps it beside its
        vocabulary files to tell one changed since it was written: two swapped words still
        make a valid file of the same size."""
        hasher = hashlib.sha256()
        for word in self.words:
            hasher.update(word.encode("utf-8") + b"\n")
        return hasher.hexdigest()

    @classmethod
    def load(cls, path: Path, unk: str | None = None) -> "Vocabulary":
        return cls(decode_text(Path(path).read_bytes()).splitlines(), unk=unk)


def word_counts(documents: Iterable[Document]) -> tuple[collections.Counter, collections.Counter]:
    """Token frequencies and document frequencies of the words of ``documents``."""
    counts: collections.Counter = collections.Counter()
    doc_counts: collections.Counter = collections.Counter()
    for document in documents:
        seen = set()
        for sentence in document:
            counts.update(sentence)
            seen.update(sentence)
        doc_counts.update(seen)
    return counts, doc_counts


def _by_frequency(counts: collections.Counter, words: Iterable[str]) -> list[str]:
    return sorted(words, key=lambda w: (-counts[w], w))


def build_lm_vocab(counts: collections.Counter, min_freq: int = 10,
                   source: str = "the training split") -> Vocabulary:
    """LM vocabulary: specials, then words with count >= min_freq by decreasing frequency.
    ``source``: where ``counts`` were read, as the error names it when no word is kept."""
    kept = [w for w, c in counts.items() if c >= min_freq and w not in LM_SPECIALS]
    if not kept:
        raise UserError(
            f"no word occurs at least {min_freq} times in {source}; "
            "lower --min-freq or use a larger corpus")
    return Vocabulary(list(LM_SPECIALS) + _by_frequency(counts, kept), unk=UNK)


@functools.lru_cache(maxsize=8)
def load_stopwords(path: Path | None = None) -> frozenset[str]:
    """A stop-word list (one word per line, ``#`` comments); default: the project's own list."""
    path = Path(path) if path is not None else DEFAULT_STOPWORDS
    if not path.is_file():
        raise UserError(f"stop-word list not found: {path} (expected one word per line)")
    lines = decode_text(path.read_bytes(), errors="replace").splitlines()
    return frozenset(w.strip().lower() for w in lines if w.strip() and not w.startswith("#"))


#: English clitics as the Treebank tokenizer splits them off ("they're" -> "they", "'re")
_CLITIC_TAILS = frozenset({"s", "re", "ll", "ve", "d", "m"})
_APOSTROPHES = ("'", "\u2019")


def _is_clitic(word: str) -> bool:
    """``'s``, ``'re``, ``n't`` ... (straight or typographic apostrophe)."""
    if word[:1] in _APOSTROPHES:
        return word[1:] in _CLITIC_TAILS
    return word[:1] == "n" and word[1:2] in _APOSTROPHES and word[2:] == "t"


def is_topic_word(word: str) -> bool:
    """A token with a letter that is not a clitic (stop words aside, the words a topic may
    hold)."""
    return any(ch.isalpha() for ch in word) and not _is_clitic(word)


#: what the ``top_fraction`` of build_topic_vocab is a fraction of: every word type of the
#: training split (the TDLM authors' ``gen_vocab``) or the LM vocabulary (earlier versions)
TOP_AMONG = ("types", "lm_vocab")


def build_topic_vocab(lm_vocab: Vocabulary, counts: collections.Counter,
                      doc_counts: collections.Counter, stopwords: frozenset[str],
                      min_docs: int = 100, top_fraction: float = 0.001,
                      top_among: str = "types") -> Vocabulary:
    """Topic-model vocabulary: LM words minus stop words, the most frequent word types (the
    ``top_fraction`` most frequent of all types in ``counts``, ``top_among="types"``, or of
    the LM words, ``"lm_vocab"``), words in fewer than ``min_docs`` documents, tokens without
    a letter and clitics; sorted by frequency (none but ``TOPIC_SPECIALS`` where no word
    qualifies)."""
    if top_among not in TOP_AMONG:
        raise ValueError(f"top_among must be one of {TOP_AMONG}, got {top_among!r}")
    candidates = [w for w in lm_vocab.words if w not in LM_SPECIALS]
    ranked = list(counts) if top_among == "types" else candidates
    num_top = int(math.floor(top_fraction * len(ranked)))
    too_frequent = set(_by_frequency(counts, ranked)[:num_top])
    kept = [w for w in candidates
            if w not in stopwords and w not in too_frequent and doc_counts[w] >= min_docs
            and is_topic_word(w)]
    # may be empty (specials only): only the models that read topic words need any, and
    # tcnlm_tf.models.build_model says so for them
    return Vocabulary(list(TOPIC_SPECIALS) + _by_frequency(counts, kept))
