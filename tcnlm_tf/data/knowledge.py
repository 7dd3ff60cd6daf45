"""Word -> senses -> sememes knowledge bases for the sememe-driven decoder (SDLM).

Gu et al. 2018, "Language Modeling with Sparse Product of Sememe Experts" (EMNLP), Sec. 3.1:
every word ``w`` of the vocabulary W (N = |W|) has a set of senses S(w) (M = |S| senses in
all) and every sense ``s`` an unordered set of sememes E(s) (K = |E| sememes, "the structural
relationship between sememes" is ignored). Each sememe is an *expert* that scores only the
senses connected to it (Sec. 3.3, D(e_k)); the paper reports, on People's Daily with
HowNet, 3.4 experts per word and 22 senses per expert (Sec. 3.3) out of K ~ 2000 sememes
(Sec. 3.4). This module builds that bipartite structure over one LM vocabulary as flat NumPy
arrays (:class:`KnowledgeBase`); it does not import TensorFlow.

Shared rules, whatever the source
---------------------------------
* **Private senses.** A vocabulary word (ids ``0..V-1``, the specials ``<pad>``, ``<unk>``,
  ``<eos>`` included) that has no entry in the source gets exactly one *private* sense with
  one *private* sememe of its own (named ``<private:WORD>``), so every word keeps a
  probability under the product of experts. The paper needs no such rule (Appendix A: every
  word of their corpus is in HowNet); the authors' ``SememeDictionary`` gives ``<unk>`` and
  ``<eos>`` sememes of their own, which is the same thing.
* **A sense per distinct sememe set.** As the authors' ``hownet.py`` (``senses_belong``):
  two senses of the same word with equal sememe sets are one sense; equal sets of two
  different words stay two senses. Senses keep the source's order (file order for HowNet,
  frequency order for WordNet, topic then class order for the synthetic corpus).
* **Ids.** Senses are numbered word by word (``sense_word`` ascending, a word's senses
  contiguous). Sememe ids: the real sememes used by the vocabulary's senses first, sorted by
  name, then the private ones in word-id order. Every real sense has >= 1 sememe. The
  output is a deterministic function of the source and the vocabulary.

Sources (``build_knowledge_base(spec, words)``)
-----------------------------------------------
``hownet:FILE``
    HowNet in the text format the SDLM authors distribute (``LM/data/HowNet.txt`` of
    github.com/thunlp/SDLM-pytorch), read as their ``LM/hownet.py`` (``SememeDictionary``)
    reads it: records of ``NO.=...``, ``W_C=...``, ``G_C=``, ``E_C=``, ``W_E=``, ``G_E=``,
    ``E_E=``, ``DEF=...`` lines, a record starting at its ``NO.`` line; the word is the
    Chinese word ``W_C`` (the text after the first 4 characters, ``W_C=``, surrounding spaces
    stripped; a record whose ``W_C`` is empty is skipped, as their reader skips it), and the
    sememes of the record's sense are the maximal runs of CJK unified ideographs
    U+4E00..U+9FA5 in its ``DEF`` (their ``re.split('[^\\u4e00-\\u9fa5]', DEF)``):
    ``DEF={human|人:HostOf={Occupation|职位},domain={economy|经济}}`` gives {人, 职位, 经济}
    (the English halves of the names and the relation names are dropped, as in theirs). Each
    record is one sense of its word. Stricter than theirs: a record without ``W_C``, without
    a ``DEF`` after its ``W_C``, or with a ``DEF`` that has no sememe is a :class:`UserError`
    naming the file and line. The file is UTF-8 (a BOM is allowed) or else GB18030, HowNet's
    original encoding. Nothing needs HowNet installed. As in their ``hownet.py``, the
    corpus's placeholders and 14 punctuation marks get fixed senses besides the file's
    (:data:`HOWNET_SPECIAL_ENTRIES`): ``<N>`` {基数}; ``<year>``, ``<date>``, ``<hour>``
    {时间, 年|月|时, 特定}; （ 『 …… ● 《 — ——— 』 》 △ 、 ） ℃ ▲ {标点}.
``wordnet``
    English WordNet 3.0 as Debian's ``wordnet-base`` installs it (``/usr/share/wordnet``, or
    ``$TCNLM_WORDNET_DIR``), read with nltk's ``WordNetCorpusReader`` without
    ``nltk.download``. Debian leaves out the ``lexnames`` file (its C library has the list
    compiled in, see the package's README.Debian), so the 45 WordNet 3.0 lexicographer file
    names are built in here; ``index.sense`` (also missing) is only needed for nltk's mapping
    between WordNet versions, which is switched off; the directory is added to
    ``nltk.data.path``, the roots nltk (3.9+) lets its readers open files under. Definition:

    - the words of the run's stop-word list (``--stopwords``, compared lower-cased) get no
      WordNet senses, so a private one: WordNet has no function words, and its entries for
      their spellings are spurious ("a" -> vitamin A and angstrom, "in" -> inch and indium,
      "us" -> United States, "may" -> the month);
    - senses of a word: its first ``max_senses`` (5) synsets of ``wn.synsets(word.lower())``
      (nltk's morphological lookup: "apples" -> apple) in WordNet's frequency order: nltk
      lists nouns, verbs, adjectives, adverbs, each by decreasing tagged frequency; they are
      stably re-sorted by the tagged count of the word's lemma in the synset (``cntlist.rev``)
      so the order is the frequency order across parts of speech too ("run" starts with its
      verb senses);
    - sememe candidates of a synset: its lexicographer file name (``noun.food``) plus its
      hypernym ancestors up to ``depth`` (3) levels above it (closure over ``hypernyms()`` and
      ``instance_hypernyms()``, named like ``edible_fruit.n.01``);
    - only units that occur in at least ``min_senses`` (5) senses of the knowledge base over
      the given vocabulary are kept (so every sememe is an expert of several senses); a sense
      left with no sememe keeps its lexicographer file (45 of them in all, so they are widely
      shared). Counting, filtering and merging equal sets are repeated until nothing changes.
``synthetic``
    The generator's truth (:mod:`tcnlm_tf.data.synthetic`, ``<synthetic_dir>/truth.npz``). A
    content word ``w`` (class 0, emitted by topics) has a sense per topic ``k`` with
    ``topic_word[k, w] >= 0.5 * max_k' topic_word[k', w]``, with sememes ``{"topic:k",
    "class:semantic"}`` (topics put their mass on their own block of words plus a small
    shared mass, so most words get one sense, some more); a function word has a sense per
    function class ``c >= 1`` with ``class_word[c, w] > 0``, with sememe ``{"class:c"}``.
    Words are matched to the LM vocabulary by string.

:func:`statistics` / :func:`format_statistics` report the sparsity numbers the paper gives,
:func:`save` / :func:`load` keep a knowledge base as ``.npz`` in a run directory.
"""
from __future__ import annotations

import dataclasses
import functools
import io
import math
import os
import re
import zipfile
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from tcnlm_tf.data.corpus import atomic_write
from tcnlm_tf.errors import UserError

SPEC_HELP = "use hownet:FILE, wordnet or synthetic"
PRIVATE_FORMAT = "<private:{}>"
FORMAT_VERSION = 1

WORDNET_DIR_ENV = "TCNLM_WORDNET_DIR"
#: where Debian's ``wordnet-base`` puts the WordNet 3.0 database
WORDNET_DIRS = ("/usr/share/wordnet",)
WORDNET_INSTALL = "apt-get install wordnet-base"

#: WordNet 3.0's lexicographer files, by number (the ``lexnames`` file, lexnames(5WN))
WORDNET_LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance",
    "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion",
    "verb.motion", "verb.perception", "verb.possession", "verb.social", "verb.stative",
    "verb.weather", "adj.ppl",
)

#: the SDLM authors' sememe pattern: a sememe is a run of these characters in DEF
_HOWNET_SEPARATOR = re.compile("[^\u4e00-\u9fa5]")


@dataclasses.dataclass(eq=False)
class KnowledgeBase:
    """Word -> senses -> sememes over one LM vocabulary (ids 0..V-1). M senses, K sememes,
    E edges."""

    words: list[str]            # the LM vocabulary, id -> word (V)
    sense_word: np.ndarray      # int32 [M]: the word id of each sense, sorted ascending
    edge_sense: np.ndarray      # int32 [E]: sense id of each (sense, sememe) edge
    edge_sememe: np.ndarray     # int32 [E]: sememe id of each edge
    sememes: list[str]          # K sememe names, real ones first; private: "<private:WORD>"
    private: np.ndarray         # bool [M]: True for a sense made by the private-sense rule
    source: str                 # "hownet:FILE" / "wordnet" / "synthetic"

    @property
    def num_words(self) -> int:
        return len(self.words)

    @property
    def num_senses(self) -> int:
        return len(self.sense_word)

    @property
    def num_real_sememes(self) -> int:
        """Sememes of real senses (ids 0..num_real_sememes-1); the rest are private."""
        return len(self.sememes) - int(self.private.sum())

    def senses_of(self, word_id: int) -> np.ndarray:
        """int [n]: the sense ids of word ``word_id``."""
        lo, hi = np.searchsorted(self.sense_word, [word_id, word_id + 1])
        return np.arange(lo, hi)

    def sememes_of(self, sense_id: int) -> list[str]:
        """The sememe names of sense ``sense_id``, by sememe id."""
        return [self.sememes[k] for k in self.edge_sememe[self.edge_sense == sense_id]]

    def word_senses(self, word: str) -> list[list[str]]:
        """The sememe names of each sense of ``word`` (a debugging view)."""
        return [self.sememes_of(s) for s in self.senses_of(self.words.index(word))]

    def validate(self) -> None:
        """Raise ValueError unless the arrays obey the rules of the module docstring."""
        v, m, k = len(self.words), len(self.sense_word), len(self.sememes)
        sw, es, ek = self.sense_word, self.edge_sense, self.edge_sememe

        def check(ok, message):
            if not ok:
                raise ValueError(f"invalid knowledge base ({self.source}): {message}")

        check(len(self.private) == m and len(es) == len(ek), "array lengths differ")
        check(m == 0 or (sw.min() >= 0 and sw.max() < v), "sense_word out of range")
        check(bool(np.all(np.diff(sw) >= 0)), "sense_word is not sorted")
        check(np.array_equal(np.unique(sw), np.arange(v)), "a word has no sense")
        check(len(es) == 0 or (es.min() >= 0 and es.max() < m and ek.min() >= 0
                               and ek.max() < k), "edge ids out of range")
        check(len(np.unique(es.astype(np.int64) * k + ek)) == len(es), "duplicate edges")
        check(np.array_equal(np.unique(es), np.arange(m)), "a sense has no sememe")
        real = k - int(self.private.sum())
        edge_private = self.private[es]
        check(bool(np.all((ek >= real) == edge_private)), "private and real sememes mixed")
        check(np.bincount(es[edge_private], minlength=m)[self.private].tolist()
              == [1] * int(self.private.sum()), "a private sense needs exactly one sememe")
        check(np.array_equal(np.sort(ek[edge_private]), np.arange(real, k)),
              "each private sememe belongs to one private sense")


# ----------------------------------------------------------------------------- assembly


def _assemble(words: Sequence[str], senses: dict[int, Iterable[Iterable[str]]],
              source: str) -> KnowledgeBase:
    """A :class:`KnowledgeBase` from ``word id -> sememe-name sets`` (in source order):
    equal sets of a word merged, private senses for the words without any."""
    per_word: list[list[frozenset[str]]] = []
    for word_id in range(len(words)):
        distinct = list(dict.fromkeys(frozenset(s) for s in senses.get(word_id, ())))
        if any(not s for s in distinct):
            raise ValueError(f"a sense of {words[word_id]!r} has no sememe")
        per_word.append(distinct)
    real = sorted({name for distinct in per_word for s in distinct for name in s})
    real_id = {name: i for i, name in enumerate(real)}
    private_names = [PRIVATE_FORMAT.format(words[w]) for w in range(len(words))
                     if not per_word[w]]
    sense_word, private, edge_sense, edge_sememe = [], [], [], []
    next_private = len(real)
    for word_id, distinct in enumerate(per_word):
        if not distinct:
            sense_word.append(word_id)
            private.append(True)
            edge_sense.append(len(sense_word) - 1)
            edge_sememe.append(next_private)
            next_private += 1
            continue
        for sense in distinct:
            sense_word.append(word_id)
            private.append(False)
            ids = sorted(real_id[name] for name in sense)
            edge_sense.extend([len(sense_word) - 1] * len(ids))
            edge_sememe.extend(ids)
    kb = KnowledgeBase(
        words=list(words),
        sense_word=np.asarray(sense_word, np.int32),
        edge_sense=np.asarray(edge_sense, np.int32),
        edge_sememe=np.asarray(edge_sememe, np.int32),
        sememes=real + private_names,
        private=np.asarray(private, bool),
        source=source,
    )
    kb.validate()
    return kb


# ----------------------------------------------------------------------------- entry point


def build_knowledge_base(spec: str, words: list[str],
                         synthetic_dir: str | Path | None = None, **options) -> KnowledgeBase:
    """The knowledge base of ``spec`` (``hownet:FILE``, ``wordnet`` or ``synthetic``) over
    the LM vocabulary ``words`` (id -> word). ``synthetic_dir`` is the synthetic corpus's
    directory (only read for ``synthetic``); ``options`` go to the WordNet builder
    (``max_senses``, ``depth``, ``min_senses``, ``directory``, ``stopwords``)."""
    spec = (spec or "").strip()
    words = [str(w) for w in words]
    if len(set(words)) != len(words):
        raise ValueError("the vocabulary has duplicate words")
    if options and spec != "wordnet":
        raise TypeError(f"options {sorted(options)} only apply to wordnet")
    if spec.startswith("hownet:") and spec[len("hownet:"):].strip():
        path = spec[len("hownet:"):].strip()
        return _assemble(words, _hownet_senses(read_hownet(path), words), f"hownet:{path}")
    if spec == "hownet" or spec == "hownet:":
        raise UserError(f"--knowledge-base {spec!r} needs the HowNet file: hownet:FILE "
                        "(the SDLM authors' HowNet.txt)")
    if spec == "wordnet":
        return _assemble(words, wordnet_senses(words, **options), "wordnet")
    if spec == "synthetic":
        if synthetic_dir is None:
            raise UserError("--knowledge-base synthetic needs the synthetic corpus "
                            "(--dataset synthetic)")
        return _assemble(words, synthetic_senses(words, synthetic_dir), "synthetic")
    raise UserError(f"unknown --knowledge-base {spec!r}; {SPEC_HELP}")


# ----------------------------------------------------------------------------- HowNet


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"HowNet file {path} not found; give --knowledge-base hownet:FILE "
                        "with the SDLM authors' HowNet.txt") from None
    except OSError as err:
        raise UserError(f"cannot read HowNet file {path}: {err.strerror or err}") from None
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise UserError(f"HowNet file {path} is neither UTF-8 nor GB18030 text")


def read_hownet(path: str | Path) -> list[tuple[str, frozenset[str]]]:
    """``(W_C word, sememe set)`` of every record of a HowNet text file, in file order.

    Read as the SDLM authors' ``SememeDictionary`` reads ``HowNet.txt`` (see the module
    docstring); a record starts at a ``NO.`` line, other lines before the first one are
    ignored.
    """
    path = Path(path)
    text = _read_text(path)
    entries: list[tuple[str, frozenset[str]]] = []
    record_line = None          # line number of the current record's NO. line
    word = None                 # its W_C word ('' = skipped record), None before W_C
    has_def = False

    def close_record():
        if record_line is None or word == "":
            return
        if word is None:
            raise UserError(f"{path}:{record_line}: malformed HowNet record: no W_C line "
                            "before the next record; every record needs W_C= and DEF=")
        if not has_def:
            raise UserError(f"{path}:{record_line}: malformed HowNet record: W_C={word} "
                            "has no DEF line after it; every record needs W_C= and DEF=")

    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("NO."):
            close_record()
            record_line, word, has_def = number, None, False
        elif record_line is None or word == "":
            continue
        elif word is None and line.startswith("W_C"):
            word = line[4:].strip()
        elif word is not None and not has_def and line.startswith("DEF"):
            has_def = True
            content = line[4:].strip()
            sememes = frozenset(s for s in _HOWNET_SEPARATOR.split(content) if s)
            if not sememes:
                shown = content if len(content) <= 60 else content[:57] + "..."
                raise UserError(f"{path}:{number}: malformed HowNet record: DEF {shown!r} "
                                f"of W_C={word} has no sememe (no Chinese sememe name)")
            entries.append((word, sememes))
    close_record()
    if record_line is None:
        raise UserError(f"{path} has no HowNet records (no NO.= lines); give the SDLM "
                        "authors' HowNet.txt")
    return entries


#: what the SDLM authors' ``LM/hownet.py`` gives the corpus's placeholders and the
#: punctuation marks HowNet.txt lacks (their ``SememeDictionary``, before it reads the file):
#: numbers are cardinals, years, dates and hours are specific times of their unit
HOWNET_SPECIAL_ENTRIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("<N>", frozenset({"基数"})),
    ("<year>", frozenset({"时间", "年", "特定"})),
    ("<date>", frozenset({"时间", "月", "特定"})),
    ("<hour>", frozenset({"时间", "时", "特定"})),
    *((mark, frozenset({"标点"})) for mark in
      ("（", "『", "……", "●", "《", "—", "———", "』", "》", "△", "、", "）", "℃", "▲")),
)


def _hownet_senses(entries: list[tuple[str, frozenset[str]]], words: Sequence[str]
                   ) -> dict[int, list[frozenset[str]]]:
    """``word id -> sememe sets`` of the vocabulary's words: the authors' special entries
    (:data:`HOWNET_SPECIAL_ENTRIES`) first, then the file's records in file order."""
    index = {w: i for i, w in enumerate(words)}
    senses: dict[int, list[frozenset[str]]] = {}
    for word, sememes in (*HOWNET_SPECIAL_ENTRIES, *entries):
        if word in index:
            senses.setdefault(index[word], []).append(sememes)
    return senses


# ----------------------------------------------------------------------------- WordNet


def find_wordnet_dir(directory: str | Path | None = None) -> Path:
    """The WordNet 3.0 database directory (``data.noun``, ``index.noun``, ...): ``directory``,
    else ``$TCNLM_WORDNET_DIR``, else Debian's ``/usr/share/wordnet``."""
    explicit = directory or os.environ.get(WORDNET_DIR_ENV)
    candidates = [Path(explicit)] if explicit else [Path(d) for d in WORDNET_DIRS]
    for candidate in candidates:
        if all((candidate / f).is_file() for f in ("data.noun", "index.noun")):
            return candidate.resolve()
    if directory:
        where = str(candidates[0])
    elif explicit:
        where = f"{candidates[0]} (${WORDNET_DIR_ENV})"
    else:
        where = " or ".join(map(str, candidates))
    raise UserError(f"WordNet 3.0 not found in {where}; install it with `{WORDNET_INSTALL}` "
                    f"(or `make install`, which tries), or set {WORDNET_DIR_ENV} to a "
                    "directory with data.noun and index.noun")


@functools.lru_cache(maxsize=2)
def _wordnet_reader(root: str):
    """nltk's reader over ``root`` with what Debian's layout lacks worked around."""
    import warnings

    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    lexnames = "".join(f"{i:02d}\t{name}\t0\n" for i, name in enumerate(WORDNET_LEXNAMES))

    class DebianWordNetReader(WordNetCorpusReader):
        def open(self, fileid):
            if fileid == "lexnames" and not (Path(root) / "lexnames").is_file():
                return io.StringIO(lexnames)
            return super().open(fileid)

        def map_wn(self, version="wordnet"):
            return None     # the inter-version mapping needs index.sense and nltk_data

    # nltk (3.9+) opens only files under its data path roots
    if root not in [str(p) for p in nltk.data.path]:
        nltk.data.path.append(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available"
        reader = DebianWordNetReader(root, None)
    counts: dict[str, int] = {}
    cntlist = Path(root) / "cntlist.rev"
    if cntlist.is_file():
        for line in cntlist.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 3:
                counts[parts[0]] = int(parts[2])
    return reader, counts


def _ancestors(synset, depth: int) -> set[str]:
    names, frontier = set(), {synset}
    for _ in range(depth):
        frontier = {h for s in frontier for h in (*s.hypernyms(), *s.instance_hypernyms())}
        names.update(h.name() for h in frontier)
    return names


def wordnet_senses(words: Sequence[str], *, max_senses: int = 5, depth: int = 3,
                   min_senses: int = 5, directory: str | Path | None = None,
                   stopwords: Iterable[str] = ()) -> dict[int, list[frozenset[str]]]:
    """``word id -> sememe sets`` from WordNet 3.0 (definition in the module docstring);
    the words in ``stopwords`` (lower-case) are left out, so they get private senses."""
    if max_senses < 1 or depth < 0 or min_senses < 1:
        raise ValueError("need max_senses >= 1, depth >= 0, min_senses >= 1")
    wn, counts = _wordnet_reader(str(find_wordnet_dir(directory)))
    stopwords = frozenset(stopwords)
    raw: dict[int, list[tuple[str, frozenset[str]]]] = {}   # (lexname, candidates)
    for word_id, word in enumerate(words):
        lookup = word.lower()
        if lookup in stopwords:
            continue
        synsets = list(dict.fromkeys(wn.synsets(lookup)))
        if not synsets:
            continue
        forms = {lookup, *(wn.morphy(lookup, p) for p in "nvar")}

        def tagged(synset):
            return max((counts.get(lemma.key(), 0) for lemma in synset.lemmas()
                        if lemma.name().lower() in forms), default=0)

        synsets = sorted(synsets, key=lambda s: -tagged(s))[:max_senses]
        raw[word_id] = [(s.lexname(), frozenset({s.lexname(), *_ancestors(s, depth)}))
                        for s in synsets]
    kept = {u for senses in raw.values() for _, units in senses for u in units}
    while True:
        senses = {w: list(dict.fromkeys((units & kept) or frozenset({lexname})
                                        for lexname, units in pairs))
                  for w, pairs in raw.items()}
        used: dict[str, int] = {}
        for distinct in senses.values():
            for sense in distinct:
                for unit in sense:
                    used[unit] = used.get(unit, 0) + 1
        shared = {u for u in kept if used.get(u, 0) >= min_senses}
        if shared == kept:
            return senses
        kept = shared


# ----------------------------------------------------------------------------- synthetic


#: a topic is a sense of a content word when it gives the word at least this fraction of
#: the largest probability any topic gives it
SYNTHETIC_TOPIC_FRACTION = 0.5


def synthetic_senses(words: Sequence[str], synthetic_dir: str | Path
                     ) -> dict[int, list[frozenset[str]]]:
    """``word id -> sememe sets`` from the synthetic corpus's truth (module docstring)."""
    from tcnlm_tf.data import synthetic

    truth = synthetic.load_truth(synthetic_dir)
    index = {w: i for i, w in enumerate(truth.words)}
    senses: dict[int, list[frozenset[str]]] = {}
    for word_id, word in enumerate(words):
        t = index.get(word)
        if t is None:
            continue
        column = truth.topic_word[:, t]
        found = []
        if column.max() > 0:
            topics = np.flatnonzero(column >= SYNTHETIC_TOPIC_FRACTION * column.max())
            found += [frozenset({f"topic:{k}", "class:semantic"}) for k in topics]
        classes = np.flatnonzero(truth.class_word[1:, t] > 0) + 1
        found += [frozenset({f"class:{c}"}) for c in classes]
        if found:
            senses[word_id] = found
    return senses


# ----------------------------------------------------------------------------- statistics


def _ratio(a, b) -> float:
    return float(a) / float(b) if b else math.nan


def statistics(kb: KnowledgeBase, token_counts: np.ndarray | None = None) -> dict:
    """The knowledge base's size and sparsity (the paper's Sec. 3.3 numbers):

    ``words`` V; ``words_covered`` words with a real (non-private) sense; ``senses`` M
    (private ones included); ``private_senses``; ``sememes`` real sememes; ``experts_per_word``
    mean over covered words of the distinct real sememes of the word (paper: 3.4);
    ``senses_per_expert`` mean over real sememes of the senses connected to it (paper: 22);
    ``senses_per_word`` mean over covered words; ``sememes_per_sense`` mean over real senses;
    with ``token_counts`` [V]: ``private_token_mass``, the fraction of tokens whose word has
    only a private sense. Means over nothing are NaN.
    """
    v, k = kb.num_words, len(kb.sememes)
    real_sense = ~kb.private
    covered = np.zeros(v, bool)
    covered[kb.sense_word[real_sense]] = True
    real_edge = real_sense[kb.edge_sense]
    edge_word = kb.sense_word[kb.edge_sense[real_edge]].astype(np.int64)
    word_sememe_pairs = len(np.unique(edge_word * k + kb.edge_sememe[real_edge]))
    num_covered, num_real_senses = int(covered.sum()), int(real_sense.sum())
    stats = {
        "words": v,
        "words_covered": num_covered,
        "senses": kb.num_senses,
        "private_senses": int(kb.private.sum()),
        "sememes": kb.num_real_sememes,
        "experts_per_word": _ratio(word_sememe_pairs, num_covered),
        "senses_per_expert": _ratio(real_edge.sum(), kb.num_real_sememes),
        "senses_per_word": _ratio(num_real_senses, num_covered),
        "sememes_per_sense": _ratio(real_edge.sum(), num_real_senses),
    }
    if token_counts is not None:
        counts = np.asarray(token_counts, np.float64)
        if counts.shape != (v,):
            raise ValueError(f"token_counts must have shape [{v}], got {counts.shape}")
        stats["private_token_mass"] = _ratio(counts[~covered].sum(), counts.sum())
    return stats


_ROWS = (  # key, label, paper (HowNet, People's Daily; Gu et al. 2018 Sec. 3.3)
    ("words", "words", None),
    ("words_covered", "words covered", None),
    ("senses", "senses", None),
    ("private_senses", "private senses", None),
    ("sememes", "sememes (real)", None),
    ("experts_per_word", "experts per word", "3.4"),
    ("senses_per_expert", "senses per expert", "22"),
    ("senses_per_word", "senses per word", None),
    ("sememes_per_sense", "sememes per sense", None),
    ("private_token_mass", "private token mass", None),
)


def format_statistics(stats: dict, *more: dict, labels: Sequence[str] = ("this KB",)) -> str:
    """:func:`statistics` (of one knowledge base, or several side by side, headed by
    ``labels``) as an aligned table beside the paper's numbers."""
    columns = (stats, *more)
    if len(labels) != len(columns):
        raise ValueError(f"{len(columns)} columns need {len(columns)} labels, got {labels}")

    def value(column, key):
        x = column[key]
        if key == "private_token_mass":
            return f"{100 * x:.2f}%"
        return f"{x:,}" if isinstance(x, (int, np.integer)) else f"{x:.2f}"

    rows = [("", *labels, "paper (HowNet, People's Daily)")]
    rows += [(label, *(value(c, key) for c in columns), paper or "–")
             for key, label, paper in _ROWS if key in stats]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns) + 1)]
    return "\n".join(("  ".join([f"{r[0]:<{widths[0]}}"]
                                 + [f"{x:>{w}}" for x, w in zip(r[1:-1], widths[1:])]
                                 + [r[-1]])).rstrip() for r in rows)


# ----------------------------------------------------------------------------- files


def save(kb: KnowledgeBase, path: str | Path) -> None:
    """Write ``kb`` to ``path`` (``.npz``, no pickles), atomically."""
    kb.validate()
    arrays = {
        "format": np.asarray(FORMAT_VERSION),
        "words": np.asarray(kb.words, dtype=str),
        "sense_word": kb.sense_word.astype(np.int32),
        "edge_sense": kb.edge_sense.astype(np.int32),
        "edge_sememe": kb.edge_sememe.astype(np.int32),
        "sememes": np.asarray(kb.sememes, dtype=str),
        "private": kb.private.astype(bool),
        "source": np.asarray(kb.source),
    }
    atomic_write(Path(path), lambda f: np.savez_compressed(f, **arrays))


def load(path: str | Path) -> KnowledgeBase:
    """The :class:`KnowledgeBase` that :func:`save` wrote to ``path``."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"knowledge base {path} not found")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if int(npz["format"]) != FORMAT_VERSION:
                raise ValueError(f"format {int(npz['format'])}, expected {FORMAT_VERSION}")
            kb = KnowledgeBase(
                words=[str(w) for w in npz["words"]],
                sense_word=npz["sense_word"].astype(np.int32),
                edge_sense=npz["edge_sense"].astype(np.int32),
                edge_sememe=npz["edge_sememe"].astype(np.int32),
                sememes=[str(s) for s in npz["sememes"]],
                private=npz["private"].astype(bool),
                source=str(npz["source"]),
            )
        kb.validate()
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile,
            zlib.error) as err:     # zlib.error: a compressed array with bit rot
        raise UserError(f"{path} is not a valid knowledge base ({err}); delete it to "
                        "rebuild it") from None
    return kb
