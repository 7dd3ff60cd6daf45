"""A synthetic topical corpus with a known answer: the composite HMM-LDA model.

The generator follows the composite model of Griffiths, Steyvers, Blei and Tenenbaum (2004),
"Integrating topics and syntax" (NIPS 17), which the TDLM paper (Lau, Baldwin and Cohn 2017,
"Topically driven neural language model") cites as prior work on combining topics with word
order. It is pure numpy and bit-identical for a given :class:`SyntheticConfig`.

Generative model
----------------
* Vocabulary. ``content_vocab_size`` pronounceable pseudo-words of three consonant-vowel
  syllables ("bakoru"), none of them in the stop-word list, followed by real English function
  words taken from ``resources/stopwords_en.txt``, so a stop-word filter leaves exactly the
  content words to a topic model.
* Topics. The content vocabulary is cut into ``num_topics`` equal blocks. Topic ``k`` puts mass
  ``1 - topic_shared_mass`` on its own block, spread by Dirichlet(``topic_block_concentration``),
  and mass ``topic_shared_mass`` on the whole content vocabulary, spread by
  Dirichlet(``topic_shared_concentration``). Topics are therefore distinct and sharp.
* Documents. Each document draws ``theta_d ~ Dirichlet(doc_topic_alpha)`` and a number of
  sentences uniformly in ``[min_sentences, max_sentences]``.
* Sentences. Word order comes from a first-order Markov chain over ``num_classes`` syntactic
  classes with a start distribution and an END transition; the chain is a toy grammar
  (determiner -> semantic, semantic -> verb / preposition / END, ...) whose non-zero transitions
  are perturbed by a seeded factor in ``[1 - grammar_noise, 1 + grammar_noise]``. Class 0 is the
  semantic class: each of its words draws a fresh ``z ~ theta_d`` and then ``w ~ phi_z``.
  Classes 1..C-1 emit function words from their own distributions; some function words
  ("that", "her", "before", ...) belong to two classes, so the class is genuinely hidden.
* Length cap. A sentence that reaches ``max_sentence_length`` words ends there: the END event
  then has probability 1. The oracle applies exactly the same rule.
* A sentence ends when the chain moves to END. Sentences are written without an end marker
  (the language model appends ``<eos>``), but the oracle scores the END event as ``<eos>``.

The oracle (:func:`oracle_log_probs`) scores every word given the previous words of its sentence
and the document's true ``theta`` with the forward algorithm over classes, plus ``<eos>`` after
each sentence. Its perplexity is the floor that no model of the same tokens can beat in
expectation: it is the true conditional distribution a sentence-level or document-aware
language model is trying to learn.
"""
from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import math
import json
import pathlib
import zipfile
import zlib
from typing import Callable, Sequence

import numpy as np

from tcnlm_tf.data.corpus import atomic_write, write_corpus_file
from tcnlm_tf.data.vocab import DEFAULT_STOPWORDS as STOPWORDS_PATH, load_stopwords
from tcnlm_tf.errors import UserError

SPLITS = ("train", "valid", "test")
TRUTH_FILE = "truth.npz"

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES_PER_WORD = 3
_FUNCTION_WORD_CONCENTRATION = 2.0

# Words of the function classes 1..6 (a config with C classes keeps the first C-1). Shared
# words ("that", "her", "after", "before") make the class hidden.
_FUNCTION_CLASSES = (
    "the a an this that these those some every each its their our his her no any",  # determiner
    "is was are were has had have be been can could will would should may might must did",  # verb
    "of in on at with from to into by for over under about through during between across "
    "without within upon toward after before",  # preposition
    "and or but while because although when where which that whether if than after before",
    "very often never not also just really quite still always perhaps rather",  # adverb
    "it they we he she you i her them us him who",  # pronoun
)

# Toy grammar: unnormalised weights from (start, classes) to (classes, END). States are
# semantic, determiner, verb, preposition, conjunction, adverb, pronoun; a config with C classes
# keeps the first C of them and END.
_GRAMMAR = np.array([
    # sem  det  verb prep conj adv  pron END
    [0.25, 0.40, 0.00, 0.10, 0.10, 0.00, 0.15, 0.00],  # start
    [0.22, 0.00, 0.28, 0.26, 0.13, 0.00, 0.00, 0.11],  # semantic
    [0.92, 0.00, 0.00, 0.00, 0.00, 0.08, 0.00, 0.00],  # determiner
    [0.30, 0.35, 0.00, 0.10, 0.00, 0.15, 0.00, 0.10],  # verb
    [0.35, 0.60, 0.00, 0.00, 0.00, 0.00, 0.05, 0.00],  # preposition
    [0.20, 0.30, 0.10, 0.00, 0.00, 0.10, 0.30, 0.00],  # conjunction
    [0.50, 0.00, 0.30, 0.20, 0.00, 0.00, 0.00, 0.00],  # adverb
    [0.00, 0.00, 0.80, 0.00, 0.10, 0.00, 0.00, 0.10],  # pronoun
])

MAX_CLASSES = len(_FUNCTION_CLASSES) + 1


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Every knob of the generator; the corpus is a deterministic function of this."""

    seed: int = 0
    num_topics: int = 20
    train_docs: int = 1000
    valid_docs: int = 100
    test_docs: int = 100
    min_sentences: int = 5
    max_sentences: int = 15
    content_vocab_size: int = 1000
    num_classes: int = 5            # including the semantic class 0
    doc_topic_alpha: float = 0.1
    max_sentence_length: int = 40   # END is forced after this many words
    topic_shared_mass: float = 0.1
    topic_block_concentration: float = 1.0
    topic_shared_concentration: float = 0.1
    grammar_noise: float = 0.25

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            numeric = (int,) if field.type in (int, "int") else (int, float)
            if isinstance(value, bool) or not isinstance(value, numeric) or (
                    isinstance(value, float) and not math.isfinite(value)):
                kind = "an integer" if numeric == (int,) else "a finite number"
                raise UserError(f"invalid synthetic corpus config: {field.name} must be "
                                f"{kind}, got {value!r} (--synthetic {field.name}=VALUE)")
        checks = (
            (self.num_topics >= 1, "num_topics must be >= 1"),
            (min(self.train_docs, self.valid_docs, self.test_docs) >= 0, "doc counts must be >= 0"),
            (1 <= self.min_sentences <= self.max_sentences,
             "need 1 <= min_sentences <= max_sentences"),
            (self.num_topics <= self.content_vocab_size <= _max_content_words(),
             f"content_vocab_size must be in [num_topics, {_max_content_words()}]"),
            (2 <= self.num_classes <= MAX_CLASSES, f"num_classes must be in [2, {MAX_CLASSES}]"),
            (self.doc_topic_alpha > 0, "doc_topic_alpha must be > 0"),
            (self.max_sentence_length >= 1, "max_sentence_length must be >= 1"),
            (0 <= self.topic_shared_mass < 1, "topic_shared_mass must be in [0, 1)"),
            (min(self.topic_block_concentration, self.topic_shared_concentration) > 0,
             "topic concentrations must be > 0"),
            (0 <= self.grammar_noise < 1, "grammar_noise must be in [0, 1)"),
        )
        for ok, message in checks:
            if not ok:
                raise UserError(f"invalid synthetic corpus config: {message}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d) -> "SyntheticConfig":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise UserError(f"unknown synthetic corpus config keys: {sorted(unknown)}")
        return cls(**d)


@dataclasses.dataclass
class SyntheticTruth:
    """The true generating model. V = len(words), K topics, C classes."""

    words: list[str]                 # word id -> word; content words first, then function words
    topic_word: np.ndarray           # [K, V] rows on the simplex, zero outside content words
    class_word: np.ndarray           # [C, V] emissions of each class; row 0 unused (all zero)
    start: np.ndarray                # [C] distribution of the first class of a sentence
    transition: np.ndarray           # [C, C+1] rows on the simplex; last column = END
    theta: dict[str, np.ndarray]     # split -> [num_docs, K] each document's true theta
    config: SyntheticConfig


# ----------------------------------------------------------------------------- vocabulary


def _max_content_words() -> int:
    return (len(_CONSONANTS) * len(_VOWELS)) ** _SYLLABLES_PER_WORD - len(load_stopwords())


def _content_words(rng: np.random.Generator, count: int, stopwords: frozenset[str]) -> list[str]:
    """``count`` unique pseudo-words of consonant-vowel syllables, none a stop word."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    n = len(syllables)
    words = []
    for code in rng.permutation(n ** _SYLLABLES_PER_WORD):
        word = "".join(syllables[(code // n ** i) % n] for i in range(_SYLLABLES_PER_WORD))
        if word not in stopwords:
            words.append(word)
            if len(words) == count:
                return words
    raise AssertionError("unreachable: content_vocab_size is validated")


def _function_classes(num_classes: int, stopwords: frozenset[str]) -> list[list[str]]:
    """Word lists of the function classes 1..num_classes-1, checked against the stop words."""
    classes = [words.split() for words in _FUNCTION_CLASSES[: num_classes - 1]]
    missing = sorted({w for words in classes for w in words} - stopwords)
    if missing:
        raise UserError(f"function words {missing} are missing from {STOPWORDS_PATH}")
    return classes


# ----------------------------------------------------------------------------- the model


def _topics(rng: np.random.Generator, config: SyntheticConfig, vocab_size: int) -> np.ndarray:
    """[K, V] block-sharp topics over the first ``content_vocab_size`` word ids."""
    n, k = config.content_vocab_size, config.num_topics
    topics = np.zeros((k, vocab_size))
    for topic, block in enumerate(np.array_split(np.arange(n), k)):
        own = rng.dirichlet(np.full(len(block), config.topic_block_concentration))
        shared = rng.dirichlet(np.full(n, config.topic_shared_concentration))
        topics[topic, :n] = config.topic_shared_mass * shared
        topics[topic, block] += (1.0 - config.topic_shared_mass) * own
    return topics / topics.sum(axis=1, keepdims=True)


def _grammar(rng: np.random.Generator, config: SyntheticConfig) -> tuple[np.ndarray, np.ndarray]:
    """start [C] and transition [C, C+1] (last column END): the toy grammar, perturbed."""
    c = config.num_classes
    weights = _GRAMMAR[np.ix_(range(c + 1), [*range(c), _GRAMMAR.shape[1] - 1])]
    noise = config.grammar_noise
    weights = weights * rng.uniform(1 - noise, 1 + noise, weights.shape)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights[0, :c], weights[1:]


def _class_emissions(rng: np.random.Generator, classes: list[list[str]],
                     index: dict[str, int]) -> np.ndarray:
    """[C, V] function-word emissions; row 0 (semantic) stays zero."""
    emissions = np.zeros((len(classes) + 1, len(index)))
    for c, words in enumerate(classes, start=1):
        ids = [index[w] for w in words]
        emissions[c, ids] = rng.dirichlet(np.full(len(ids), _FUNCTION_WORD_CONCENTRATION))
    return emissions


def _build_model(config: SyntheticConfig, streams: Sequence[np.random.Generator]):
    """words, topic_word [K, V], class_word [C, V], start [C], transition [C, C+1]."""
    vocab_rng, topic_rng, grammar_rng = streams
    stopwords = load_stopwords()
    classes = _function_classes(config.num_classes, stopwords)
    function_words = list(dict.fromkeys(itertools.chain.from_iterable(classes)))
    words = _content_words(vocab_rng, config.content_vocab_size, stopwords) + function_words
    topic_word = _topics(topic_rng, config, len(words))
    start, transition = _grammar(grammar_rng, config)
    class_word = _class_emissions(grammar_rng, classes, {w: i for i, w in enumerate(words)})
    return words, topic_word, class_word, start, transition


# ----------------------------------------------------------------------------- sampling


def _cdf(p: np.ndarray) -> np.ndarray:
    """Cumulative sums along the last axis, ending at exactly 1.0 (x / x == 1 in IEEE)."""
    c = np.cumsum(p, axis=-1)
    return c / c[..., -1:]


def _sample_rows(cdf_rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: cdf_rows [N, V], u [N] in [0, 1) -> [N] indices."""
    return (cdf_rows <= u[:, None]).sum(axis=1)


def _sample_classes(u: np.ndarray, start_cdf: list[float], trans_cdf: list[list[float]],
                    max_len: int) -> list[int]:
    """One sentence's class path drawn with ``u`` [max_len] uniforms; END forced at max_len."""
    end = len(start_cdf)
    path = [bisect.bisect_right(start_cdf, u[0])]
    while len(path) < max_len:
        nxt = bisect.bisect_right(trans_cdf[path[-1]], u[len(path)])
        if nxt == end:
            break
        path.append(nxt)
    return path


def _sample_document(rng: np.random.Generator, truth: SyntheticTruth, cdfs: dict,
                     theta: np.ndarray) -> list[list[str]]:
    """One document: sentences of words; ``theta`` [K] is its topic mixture."""
    cfg = truth.config
    n_sent = int(rng.integers(cfg.min_sentences, cfg.max_sentences, endpoint=True))
    paths = [_sample_classes(rng.random(cfg.max_sentence_length), cdfs["start"], cdfs["trans"],
                             cfg.max_sentence_length) for _ in range(n_sent)]
    classes = np.fromiter(itertools.chain.from_iterable(paths), dtype=np.int64)
    semantic = classes == 0
    topics = np.searchsorted(_cdf(theta), rng.random(int(semantic.sum())), side="right")
    rows = np.empty((len(classes), len(truth.words)))
    rows[semantic] = cdfs["topic"][topics]
    rows[~semantic] = cdfs["function"][classes[~semantic] - 1]
    ids = _sample_rows(rows, rng.random(len(classes)))
    tokens = [truth.words[i] for i in ids]
    bounds = np.cumsum([0] + [len(p) for p in paths])
    return [tokens[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _sample_split(rng: np.random.Generator, truth: SyntheticTruth, num_docs: int):
    """(documents, theta [num_docs, K]) of one split."""
    cdfs = {
        "start": _cdf(truth.start).tolist(),
        "trans": _cdf(truth.transition).tolist(),
        "function": _cdf(truth.class_word[1:]),
        "topic": _cdf(truth.topic_word),
    }
    alpha = np.full(truth.config.num_topics, truth.config.doc_topic_alpha)
    theta = np.empty((num_docs, truth.config.num_topics))
    docs = []
    for d in range(num_docs):
        theta[d] = rng.dirichlet(alpha)
        docs.append(_sample_document(rng, truth, cdfs, theta[d]))
    return docs, theta


def generate(config: SyntheticConfig) -> tuple[dict[str, list[list[list[str]]]], SyntheticTruth]:
    """split ('train','valid','test') -> documents -> sentences -> tokens, and the truth.

    Deterministic given ``config``. Each split has its own random stream, so changing one
    split's size leaves the other splits (and the model) unchanged.
    """
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(6)]
    truth = SyntheticTruth(*_build_model(config, streams[:3]), theta={}, config=config)
    sizes = {"train": config.train_docs, "valid": config.valid_docs, "test": config.test_docs}
    corpus = {}
    for split, rng in zip(SPLITS, streams[3:]):
        corpus[split], truth.theta[split] = _sample_split(rng, truth, sizes[split])
    return corpus, truth


# ----------------------------------------------------------------------------- files


def _truth_arrays(truth: SyntheticTruth) -> dict[str, np.ndarray]:
    arrays = {
        "words": np.array(truth.words),
        "topic_word": truth.topic_word,
        "class_word": truth.class_word,
        "start": truth.start,
        "transition": truth.transition,
        "config": np.array(json.dumps(truth.config.to_dict(), sort_keys=True)),
    }
    arrays.update({f"theta_{split}": theta for split, theta in truth.theta.items()})
    return arrays


def _file_digests(directory: pathlib.Path) -> dict[str, str | None]:
    """The SHA-256 of each split file of ``directory`` by name (None for a missing one):
    :func:`write_corpus` stores them in ``truth.npz`` to tell a corpus reused from the cache
    from one edited, truncated or rotted since, which would train silently."""
    digests: dict[str, str | None] = {}
    for split in SPLITS:
        path = directory / f"{split}.txt"
        if path.is_file():
            with open(path, "rb") as f:
                digests[path.name] = hashlib.file_digest(f, "sha256").hexdigest()
        else:
            digests[path.name] = None
    return digests


def _stored_config(directory: pathlib.Path) -> tuple[SyntheticConfig | None, str | None]:
    """``(config, None)`` for a complete corpus in ``directory`` whose files are those
    written; ``(None, why)`` for one that cannot be reused (damaged, or written by an
    earlier version without digests); ``(None, None)`` when there is none."""
    if not (directory / TRUTH_FILE).is_file():
        return None, None
    try:
        truth, written = _read_truth(directory / TRUTH_FILE)
    except ValueError as error:
        return None, str(error)
    if written is None:
        return None, ("an earlier version wrote it, without the digests of its text files "
                      "to check them by")
    found = _file_digests(directory)
    changed = sorted(name for name in found if found[name] != written.get(name))
    if changed:
        return None, f"{', '.join(changed)} missing or changed since written"
    return truth.config, None


def write_corpus(directory: pathlib.Path, config: SyntheticConfig,
                 log: Callable[[str], None] = print) -> pathlib.Path:
    """Generate and write ``{train,valid,test}.txt`` (TDLM format) and ``truth.npz``.

    Does nothing if ``directory`` already holds a complete corpus of the same config whose
    text files are those written (their digests are stored in ``truth.npz``); a damaged one
    is generated again, with a notice to ``log``.
    ``truth.npz`` marks completeness: it is removed first and written last, and every file
    is written to a temporary name and renamed, so an interrupted write never looks complete.
    Returns ``directory``.
    """
    directory = pathlib.Path(directory)
    stored, damage = _stored_config(directory)
    if stored == config:
        return directory
    if damage is not None:
        log(f"note: the synthetic corpus in {directory} cannot be reused ({damage}): "
            "generating it again")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TRUTH_FILE).unlink(missing_ok=True)
    corpus, truth = generate(config)
    for split in SPLITS:
        write_corpus_file(directory / f"{split}.txt", corpus[split])
    arrays = {**_truth_arrays(truth), "digests": np.array(json.dumps(_file_digests(directory)))}
    atomic_write(directory / TRUTH_FILE, lambda f: np.savez_compressed(f, **arrays))
    return directory


def _read_truth(path: pathlib.Path) -> tuple[SyntheticTruth, dict[str, str] | None]:
    """The truth in ``path`` and the digests of the text files stored with it (None in a
    corpus of an earlier version); a ``ValueError`` naming the file when it is damaged
    (truncated, not an npz, a member failing its checksum or its decompression)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            truth = SyntheticTruth(
                words=[str(w) for w in npz["words"]],
                topic_word=npz["topic_word"],
                class_word=npz["class_word"],
                start=npz["start"],
                transition=npz["transition"],
                theta={s: npz[f"theta_{s}"] for s in SPLITS},
                config=SyntheticConfig.from_dict(json.loads(str(npz["config"]))),
            )
            digests = json.loads(str(npz["digests"])) if "digests" in npz.files else None
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile,
            zlib.error, UserError) as err:
        raise ValueError(f"{path} is damaged ({err})") from None
    return truth, digests


def load_truth(directory) -> SyntheticTruth:
    """The :class:`SyntheticTruth` stored by :func:`write_corpus` in ``directory``; a
    :class:`UserError` naming ``truth.npz`` when it is missing or damaged."""
    path = pathlib.Path(directory) / TRUTH_FILE
    if not path.is_file():
        raise UserError(f"{path} not found: write the synthetic corpus there first")
    try:
        return _read_truth(path)[0]
    except ValueError as error:
        raise UserError(f"{error}; delete it: train.run on this synthetic corpus config "
                        "generates the corpus again") from None


# ----------------------------------------------------------------------------- the oracle


def _word_ids(truth: SyntheticTruth, sentences: list[list[str]]) -> list[np.ndarray]:
    index = {w: i for i, w in enumerate(truth.words)}
    try:
        return [np.array([index[w] for w in s], dtype=np.int64) for s in sentences]
    except KeyError as err:
        raise UserError(f"word {err.args[0]!r} is not in the synthetic generator's vocabulary; "
                        "the documents do not come from this truth") from None


def _forward(truth: SyntheticTruth, emissions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalised forward recursion over classes for a padded batch of sentences.

    ``emissions`` [S, T, C]: p(observed word t | class), padded with ones past each sentence.
    Returns ``pred`` [S, T+1, C], the joint probability of "no END yet, next class = c" before
    each word given the previous ones, and ``end`` [S, T+1], the probability of END there.
    """
    s, t_max, c = emissions.shape
    pred = np.zeros((s, t_max + 1, c))
    end = np.zeros((s, t_max + 1))
    pred[:, 0] = truth.start
    for t in range(t_max):
        joint = pred[:, t] * emissions[:, t]
        with np.errstate(invalid="ignore", divide="ignore"):
            alpha = joint / joint.sum(axis=1, keepdims=True)
        pred[:, t + 1] = alpha @ truth.transition[:, :c]
        end[:, t + 1] = alpha @ truth.transition[:, c]
    if t_max == truth.config.max_sentence_length:  # the length cap forces END
        pred[:, t_max], end[:, t_max] = 0.0, 1.0
    return pred, end


def _observed_emissions(truth: SyntheticTruth, thetas: np.ndarray, ids: np.ndarray,
                        groups: np.ndarray | None) -> np.ndarray:
    """[N, C] p(word | class) for words ``ids`` [N] in documents with ``thetas`` [N, K].

    With ``groups`` [V] (word -> token group id), the probability of the word's whole group.
    """
    topic_word, class_word, cols = truth.topic_word, truth.class_word, ids
    if groups is not None:
        topic_word, class_word = _group_sum(topic_word, groups), _group_sum(class_word, groups)
        cols = groups[ids]
    out = class_word[:, cols].T.copy()
    out[:, 0] = np.einsum("nk,kn->n", thetas, topic_word[:, cols])
    return out


def _group_sum(matrix: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """[R, V] -> [R, G]: sum the columns of each group."""
    out = np.zeros((matrix.shape[0], groups.max() + 1))
    np.add.at(out.T, groups, matrix.T)
    return out


def _token_groups(truth: SyntheticTruth, token_of: Callable[[str], str] | None):
    """[V] group id of each word's LM token, or None for the identity."""
    if token_of is None:
        return None
    _, groups = np.unique(np.array([token_of(w) for w in truth.words]), return_inverse=True)
    return groups


def _pad(sentence_ids: list[np.ndarray], thetas: np.ndarray, truth: SyntheticTruth,
         groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(true [S, T, C], scored [S, T, C], lengths [S]) emissions of a batch of sentences."""
    lengths = np.array([len(s) for s in sentence_ids])
    if not all(1 <= n <= truth.config.max_sentence_length for n in lengths):
        raise UserError("every sentence needs 1 to max_sentence_length="
                        f"{truth.config.max_sentence_length} words to come from the generator")
    ids = np.concatenate(sentence_ids)
    tok_thetas = np.repeat(thetas, lengths, axis=0)
    sent = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    shape = (len(lengths), lengths.max(), truth.class_word.shape[0])
    true = np.ones(shape)
    true[sent, pos] = _observed_emissions(truth, tok_thetas, ids, None)
    if groups is None:
        return true, true, lengths
    scored = np.ones(shape)
    scored[sent, pos] = _observed_emissions(truth, tok_thetas, ids, groups)
    return true, scored, lengths


def _sentence_log_probs(truth: SyntheticTruth, thetas: np.ndarray, sentences: list[list[str]],
                        token_of: Callable[[str], str] | None = None) -> np.ndarray:
    """[S] natural-log probability of each sentence followed by END; ``thetas`` [S, K]."""
    true, scored, lengths = _pad(_word_ids(truth, sentences), thetas, truth,
                                 _token_groups(truth, token_of))
    pred, end = _forward(truth, true)
    mask = np.arange(true.shape[1]) < lengths[:, None]
    step_probs = np.where(mask, np.einsum("stc,stc->st", pred[:, :-1], scored), 1.0)
    with np.errstate(divide="ignore"):
        log_probs = np.log(step_probs).sum(axis=1) + np.log(end[np.arange(len(lengths)), lengths])
    return np.where(np.isnan(log_probs), -np.inf, log_probs)  # NaN: a word of probability 0


def sentence_log_prob(truth: SyntheticTruth, theta: np.ndarray, sentence: list[str],
                      token_of: Callable[[str], str] | None = None) -> float:
    """log p(sentence, END | theta) under the true model; ``theta`` [K]."""
    return float(_sentence_log_probs(truth, np.asarray(theta)[None], [sentence], token_of)[0])


def step_distributions(truth: SyntheticTruth, theta: np.ndarray, sentence: list[str]) -> np.ndarray:
    """[len(sentence)+1, V+1] next-word distributions of ``sentence`` given ``theta`` [K].

    Row t is p(word t | words before t, theta) over the generator vocabulary plus END (last
    column); the last row follows the whole sentence. Rows sum to 1.
    """
    true, _, _ = _pad(_word_ids(truth, [sentence]), np.asarray(theta)[None], truth, None)
    pred, end = _forward(truth, true)
    emissions = truth.class_word.copy()
    emissions[0] = theta @ truth.topic_word
    return np.hstack([pred[0] @ emissions, end[0][:, None]])


def oracle_log_probs(truth: SyntheticTruth, split: str, documents: list[list[list[str]]],
                     token_of: Callable[[str], str] | None = None) -> tuple[float, int]:
    """(total negative log-likelihood in nats, number of predicted tokens) of ``documents``.

    ``documents`` are the first documents of ``split`` in order (document i uses
    ``truth.theta[split][i]``). Every word is scored given the previous words of its sentence and
    the document's true theta (forward algorithm over classes), and ``<eos>`` after each
    sentence; tokens = words + sentences. ``token_of`` maps a generator word to the token a
    model sees (e.g. rare words -> '<unk>'); words sharing a token pool their probability,
    while the forward recursion still conditions on the true word.
    """
    theta = truth.theta[split]
    if len(documents) > len(theta):
        raise UserError(f"{len(documents)} documents given but split {split!r} has {len(theta)}")
    sentences = [s for doc in documents for s in doc]
    if not sentences:
        return 0.0, 0
    thetas = np.repeat(theta[: len(documents)], [len(doc) for doc in documents], axis=0)
    log_probs = _sentence_log_probs(truth, thetas, sentences, token_of)
    return float(-log_probs.sum()), sum(len(s) + 1 for s in sentences)


def oracle_perplexity(truth: SyntheticTruth, split: str, documents: list[list[list[str]]],
                      token_of: Callable[[str], str] | None = None) -> float:
    """exp(nll / tokens) of :func:`oracle_log_probs`: the floor no model can beat."""
    nll, count = oracle_log_probs(truth, split, documents, token_of)
    if count == 0:
        raise UserError(f"no tokens to score in split {split!r}")
    return float(np.exp(nll / count))
