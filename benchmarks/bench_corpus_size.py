"""``python -m benchmarks.bench_corpus_size``: how the input path scales with corpus size.

For each size of ``--sizes`` (training tokens), and for this checkout's code ("current")
and, with ``--baseline REF``, for that commit's code ("baseline") side by side:

1. Corpus. A TDLM-format corpus (one document per line, sentences separated by a TAB,
   tokens by a space, lower-case) is generated into ``--work-dir``/corpora/ by NumPy, in
   chunks of about 4 M tokens, or reused when one of the same size, seed, vocabulary and
   topics is already there (its ``generated.json`` says how it was made). Its words are
   ``--vocabulary`` pseudo-words (syllables; the frequent ones short). A document has 10 to
   30 sentences of 5 to 40 tokens (uniform) and one to three of ``--topics`` topics; each
   token is, with probability 0.6, a word of the general fifth of the vocabulary (Zipf,
   exponent 1) and otherwise a word of the block of one of its document's topics (Zipf
   within the block), so that TCNLM has topic words. The training split holds exactly the
   asked number of tokens; the valid and test splits about 1 % of it each (at least 2,250
   tokens, about five documents). Disk use: the text's bytes (the three files) and the
   prepared cache's bytes (every file under the fresh cache directory after preparation).
2. Preparation. A fresh child process runs the code's own ``load_corpus`` (with the data
   settings that ``train.run`` derives from the training flags, parsed by the code's own
   ``build_parser``/``config_from_args``, so that training finds the cache) into a fresh
   cache directory. "prep s" is the ``load_corpus`` call's wall time measured in the child
   (interpreter start and imports excluded); "prep peak RSS" is the child's peak resident
   set (imports included): ``ru_maxrss`` of the ``rusage`` that ``os.wait4`` returns for
   that one child; "anon" is the peak of its anonymous resident set (``RssAnon`` of
   ``/proc/<pid>/status``, sampled every 50 ms by the launcher): the memory the process
   allocated, without the file-backed pages of its mapped files and libraries, which the
   kernel can drop and read again (``RssFile``, "file"). Every measured command runs under
   a small launcher process
   (``python -c``, a few MB) that forks it and reaps it with ``os.wait4``: Linux counts the
   resident set a process had when it forked and exec'd into the child's ``ru_maxrss``,
   which would otherwise hold the benchmark's own memory. (The machine line, which imports
   TensorFlow, is computed in a child process too.)
3. Training. A fresh child runs ``python -m train.run`` for ``--steps`` optimiser steps of
   each of ``--models`` on the prepared cache (same ``--cache-dir``; the log is checked for
   a second preparation), with ``--log-every 1`` so that the trainer writes its
   ``train/tokens_per_sec`` TensorBoard scalar at every step. "start-up s" runs from the
   child's spawn to the wall time of the step-1 event: imports, opening the prepared
   corpus, building the model, tracing and running the first step. "tokens/s" is the
   trainer's own per-step ``train/tokens_per_sec`` over steps 2..N, each weighted by the
   wall time since the event before it (so: the tokens of steps 2..N over their wall time,
   start-up excluded). "train peak RSS", "anon" and "file" are the child's as above: the
   prepared corpus is read through memory maps, so the pages of its shards that training
   has touched count in the file-backed part, up to the shards' size. Steps past
   the end of the first epoch would put a validation inside the timed steps: a note says
   so.
4. Baseline. ``--baseline REF`` measures the same with the code of commit REF, checked out
   once with ``git worktree add --detach <work-dir>/baseline-<sha>`` (reused later) and run
   with the same Python (``sys.executable``) from that directory, which comes first on
   ``PYTHONPATH``. Only the sizes of ``--baseline-sizes`` run. A baseline step still running
   after ``--baseline-timeout`` seconds is killed and recorded as "did not finish", with its
   peak resident set so far (``VmHWM`` of ``/proc/<pid>/status``, read just before the
   kill); a step that fails (e.g. out of memory) is recorded with its exit status and the
   last line of its output. So the table says how far the baseline gets, never a crash.
   (``--timeout`` sets such a limit for the current code's steps too; none by default.)

Every step's output is kept in ``<work-dir>/measured/<code>/<corpus>/logs/``, beside the
cache and the runs.

MB are 10^6 bytes. The summary gives the peak RSS at the largest size over that at the
smallest (current code; the goal is at most 1.2), the same for the anonymous resident set,
the preparation's seconds per million tokens at each size (flat is linear), and tokens/s
and peak RSS current/baseline at each size where both ran. Every figure is computed in the
run; ``--output FILE`` writes them all as JSON.

    python -m benchmarks.bench_corpus_size --work-dir scale-work
    python -m benchmarks.bench_corpus_size --work-dir scale-work --baseline HEAD
    python -m benchmarks.bench_corpus_size --work-dir scale-work --sizes 1M,4M --steps 50 \\
        --models lstm --hidden-size 64 --train-flags "--mode document" --output scale.json
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fractions
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Allow `python benchmarks/bench_corpus_size.py` as well as `python -m ...` from the root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.harness import Parser, name_list, print_table  # noqa: E402
from tcnlm_tf.arguments import integer, random_seed  # noqa: E402
from tcnlm_tf.errors import UserError, exit_on_user_error  # noqa: E402

PROGRAM = "python -m benchmarks.bench_corpus_size"
REPO_ROOT = Path(__file__).resolve().parent.parent
MB = 1e6
SPLITS = ("train", "valid", "test")
CODES = ("current", "baseline")

# ----------------------------------------------------------------------------- generator

#: bumped whenever the generator writes other text for the same settings
GENERATOR_VERSION = 1
CONSONANTS = "bcdfghjklmnprstvwxyz"
VOWELS = "aeiou"
#: 100 two-letter syllables: the digits of the pseudo-words
SYLLABLES = tuple(c + v for c in CONSONANTS for v in VOWELS)
SENTENCES_PER_DOCUMENT = (10, 30)
TOKENS_PER_SENTENCE = (5, 40)
TOPICS_PER_DOCUMENT = (1, 3)
MEAN_DOCUMENT_TOKENS = 450          # 20 sentences of 22.5 tokens
#: the share of a document's tokens drawn from the general words, not its topics' blocks
GENERAL_SHARE = 0.6
#: the part of the vocabulary (ranks from the top) that is general, not in a topic block
GENERAL_FRACTION = 0.2
#: the entries of a word-sampling table (an inverse CDF at evenly spaced quantiles): a word
#: rarer than 1 / TABLE_SIZE in its distribution is never drawn
TABLE_BITS = 20          # + 9 + 3 bits: TextMaker.token_ids
TABLE_SIZE = 1 << TABLE_BITS
CHUNK_TOKENS = 1 << 22
#: valid and test: this fraction of the training tokens, at least HELD_OUT_MINIMUM
HELD_OUT_FRACTION = 0.01
HELD_OUT_MINIMUM = 5 * MEAN_DOCUMENT_TOKENS
MAX_VOCABULARY = 1_000_000


@dataclasses.dataclass(frozen=True)
class CorpusSpec:
    """What a generated corpus is made of; equal specs give byte-identical files."""

    tokens: int
    vocabulary: int = 50_000
    topics: int = 50
    seed: int = 0

    @property
    def name(self) -> str:
        """The dataset (folder) name: ``gen10M-v50000-k50-s0``."""
        return f"gen{size_label(self.tokens)}-v{self.vocabulary}-k{self.topics}-s{self.seed}"

    @property
    def block(self) -> int:
        """Words per topic block."""
        return int(self.vocabulary * (1 - GENERAL_FRACTION)) // self.topics

    @property
    def general(self) -> int:
        """General words: the most frequent ranks, before the topic blocks."""
        return self.vocabulary - self.topics * self.block

    def held_out_tokens(self) -> int:
        return max(int(self.tokens * HELD_OUT_FRACTION), HELD_OUT_MINIMUM)

    def to_dict(self) -> dict[str, int]:
        return {"generator": GENERATOR_VERSION, **dataclasses.asdict(self)}


def pseudo_words(count: int) -> list[str]:
    """``count`` distinct lower-case pseudo-words: word i is i+1 written in bijective base
    100 with :data:`SYLLABLES` as digits (100 words of 2 letters, then 10,000 of 4, ...), so
    the frequent ranks are the short words."""
    words = []
    for i in range(count):
        n, syllables = i + 1, []
        while n:
            n -= 1
            syllables.append(SYLLABLES[n % 100])
            n //= 100
        words.append("".join(reversed(syllables)))
    return words


def word_matrix(words: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each word as a row of 8-byte units, for fast gathers: ([V, U] uint64: the word's bytes,
    a space, then zeros; [V, U] uint64: the same bytes of a bool mask, true on the word and
    its space; [V] int64: the words' lengths)."""
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    width = -(-(int(lengths.max()) + 1) // 8) * 8
    matrix = np.zeros((len(words), width), dtype=np.uint8)
    for i, word in enumerate(words):
        matrix[i, :len(word)] = np.frombuffer(word.encode("ascii"), dtype=np.uint8)
    matrix[np.arange(len(words)), lengths] = ord(" ")
    keep = np.arange(width) <= lengths[:, None]
    return matrix.view(np.uint64), keep.view(np.uint64), lengths


def zipf_table(count: int, exponent: float = 1.0) -> np.ndarray:
    """[TABLE_SIZE] int32: ranks 0..count-1 at evenly spaced quantiles of a Zipf
    distribution (p(r) proportional to (r+1)^-exponent): ``table[uniform integer]`` draws a
    rank."""
    weights = np.arange(1, count + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights) / weights.sum()
    quantiles = (np.arange(TABLE_SIZE, dtype=np.float64) + 0.5) / TABLE_SIZE
    return np.minimum(np.searchsorted(cdf, quantiles), count - 1).astype(np.int32)


def document_chunks(tokens: int, rng: np.random.Generator):
    """(sentences per document, tokens per sentence) chunk by chunk, about
    :data:`CHUNK_TOKENS` tokens each, exactly ``tokens`` in all (the last sentence and
    document are cut short)."""
    remaining = tokens
    while remaining > 0:
        documents = min(CHUNK_TOKENS, remaining) // MEAN_DOCUMENT_TOKENS + 1
        sentences = rng.integers(SENTENCES_PER_DOCUMENT[0], SENTENCES_PER_DOCUMENT[1] + 1,
                                 documents)
        lengths = rng.integers(TOKENS_PER_SENTENCE[0], TOKENS_PER_SENTENCE[1] + 1,
                               int(sentences.sum()))
        ends = np.cumsum(lengths)
        if ends[-1] >= remaining:
            last = int(np.searchsorted(ends, remaining))          # first end >= remaining
            lengths = lengths[:last + 1].copy()
            lengths[last] = remaining - (ends[last - 1] if last else 0)
            document_ends = np.cumsum(sentences)
            doc = int(np.searchsorted(document_ends, last + 1))
            sentences = sentences[:doc + 1].copy()
            sentences[doc] = last + 1 - (document_ends[doc - 1] if doc else 0)
        remaining -= int(lengths.sum())
        yield sentences, lengths


class TextMaker:
    """Token ids and their text, chunk by chunk, for one :class:`CorpusSpec`."""

    def __init__(self, spec: CorpusSpec):
        self.spec = spec
        self.matrix, self.keep, self.lengths = word_matrix(pseudo_words(spec.vocabulary))
        #: [2 * TABLE_SIZE]: the general words' ranks, then the ranks within a block
        self.table = np.concatenate([zipf_table(spec.general), zipf_table(spec.block)])

    def token_ids(self, sentences: np.ndarray, lengths: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
        """The ids of one chunk's tokens: general words with probability GENERAL_SHARE,
        else words of one of the document's topics' blocks. One random 32-bit integer per
        token: 20 bits pick the word (an entry of a table), 9 whether it is general, 3 the
        topic (one of 8 slots, which a document's one to three topics fill in turn, so
        that with three topics their weights are 3:3:2)."""
        spec, documents = self.spec, len(sentences)
        document_of = np.repeat(np.repeat(np.arange(documents, dtype=np.int32), sentences),
                                lengths)
        topics = rng.integers(0, spec.topics, (documents, TOPICS_PER_DOCUMENT[1]))
        held = rng.integers(TOPICS_PER_DOCUMENT[0], TOPICS_PER_DOCUMENT[1] + 1, documents)
        slots = topics[np.arange(documents)[:, None], np.arange(8) % held[:, None]]
        offsets = (spec.general + slots * spec.block).astype(np.int32).reshape(-1)
        bits = rng.integers(0, 1 << 32, len(document_of), dtype=np.uint32)
        topical = ((bits >> TABLE_BITS) & 511) >= round(GENERAL_SHARE * 512)
        entry = (bits & (TABLE_SIZE - 1)) | (topical.astype(np.uint32) << TABLE_BITS)
        slot = (document_of << 3) | (bits >> 29).astype(np.int32)
        return self.table[entry] + offsets[slot] * topical

    def text(self, ids: np.ndarray, sentences: np.ndarray, lengths: np.ndarray) -> bytes:
        """The TDLM-format bytes of one chunk: words joined by spaces, a TAB after each
        sentence but a document's last, a newline after each document."""
        rows = self.matrix.take(ids, axis=0).view(np.uint8).reshape(len(ids), -1)
        keep = self.keep.take(ids, axis=0).view(bool).reshape(len(ids), -1)
        sentence_ends = np.cumsum(lengths) - 1
        separators = np.full(len(sentence_ends), ord("\t"), dtype=np.uint8)
        separators[np.cumsum(sentences) - 1] = ord("\n")
        rows[sentence_ends, self.lengths[ids[sentence_ends]]] = separators
        return rows[keep].tobytes()


def write_split(path: Path, tokens: int, maker: TextMaker,
                rng: np.random.Generator) -> dict[str, int]:
    """Write one split of exactly ``tokens`` tokens; its counts."""
    counts = {"tokens": 0, "documents": 0, "sentences": 0, "bytes": 0}
    with open(path, "wb") as handle:
        for sentences, lengths in document_chunks(tokens, rng):
            data = maker.text(maker.token_ids(sentences, lengths, rng), sentences, lengths)
            handle.write(data)
            counts["tokens"] += int(lengths.sum())
            counts["documents"] += len(sentences)
            counts["sentences"] += len(lengths)
            counts["bytes"] += len(data)
    return counts


def generate_corpus(directory: Path, spec: CorpusSpec) -> dict[str, Any]:
    """Write ``directory``/{train,valid,test}.txt and ``generated.json`` for ``spec`` (in a
    temporary directory renamed into place once complete); what ``generated.json`` says.
    Each split has its own random stream (seeded by the seed and the split), so the
    held-out splits never change the training text."""
    directory = Path(directory)
    tmp = directory.with_name(f".{directory.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    start = time.perf_counter()
    maker = TextMaker(spec)
    splits = {}
    for index, split in enumerate(SPLITS):
        tokens = spec.tokens if split == "train" else spec.held_out_tokens()
        rng = np.random.default_rng([spec.seed, index])
        splits[split] = write_split(tmp / f"{split}.txt", tokens, maker, rng)
    seconds = time.perf_counter() - start
    info = {"spec": spec.to_dict(), "splits": splits, "seconds": seconds}
    (tmp / "generated.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    os.rename(tmp, directory)
    return info


def existing_corpus(directory: Path, spec: CorpusSpec) -> dict[str, Any] | None:
    """What ``generated.json`` of ``directory`` says, when it was made from ``spec`` and its
    files are all there with their sizes; else None."""
    try:
        info = json.loads((Path(directory) / "generated.json").read_text())
    except (OSError, ValueError):
        return None
    if info.get("spec") != spec.to_dict():
        return None
    for split in SPLITS:
        path = Path(directory) / f"{split}.txt"
        if not path.is_file() or path.stat().st_size != info["splits"][split]["bytes"]:
            return None
    return info


def ensure_corpus(corpora: Path, spec: CorpusSpec) -> dict[str, Any]:
    """The corpus of ``spec`` under ``corpora``, generated unless already there; its
    ``generated.json`` with ``reused`` and ``path`` added."""
    directory = corpora / spec.name
    info = existing_corpus(directory, spec)
    reused = info is not None
    if not reused:
        info = generate_corpus(directory, spec)
    return {**info, "reused": reused, "path": str(directory)}


# ------------------------------------------------------------------------------- flags


def token_count(text: str) -> int:
    """'10M' -> 10,000,000; '20K', '1G' and plain integers too (case-insensitive); at
    least 1,000 (a corpus needs a vocabulary and held-out documents)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a token count such as 10M, 500K or "
                                         f"20000, got {text!r}")
    factor = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[match.group(2).lower()]
    value = fractions.Fraction(match.group(1)) * factor
    if value.denominator != 1 or value < 1000:
        raise argparse.ArgumentTypeError(f"a corpus size is a whole number of tokens, at "
                                         f"least 1K, got {text!r}")
    return int(value)


def size_list(flag: str):
    """argparse type: a comma list of token counts -> sorted, without duplicates."""

    def parse(text: str) -> list[int]:
        items = [item for item in text.split(",") if item.strip()]
        if not items:
            raise UserError(f"{flag} {text!r}: no size given; e.g. {flag} 10M,50M")
        try:
            return sorted({token_count(item) for item in items})
        except argparse.ArgumentTypeError as err:
            raise UserError(f"{flag}: {err}") from None

    return parse


def size_label(tokens: int) -> str:
    """10,000,000 -> '10M', 20,000 -> '20K', 12,345 -> '12345'."""
    for suffix, factor in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if tokens % factor == 0:
            return f"{tokens // factor}{suffix}"
    return str(tokens)


def model_names() -> tuple[str, ...]:
    from tcnlm_tf.models.registry import MODELS

    return tuple(MODELS)


COLUMNS_HELP = """\
One row per size, code (current: this checkout; baseline: --baseline REF) and model:
  tokens             training tokens of the generated corpus
  text MB, cache MB  the corpus's three files; the prepared cache (10^6 bytes)
  prep s             load_corpus's wall time in a fresh process and cache directory
  prep peak RSS MB   that process's peak resident set (os.wait4's ru_maxrss); anon MB: the
                     peak of its anonymous part (RssAnon, sampled every 50 ms)
  start-up s         train.run's spawn to the end of its first step (TensorBoard event)
  train peak RSS MB  the training process's peak resident set; anon MB and file MB: the
                     peaks of its anonymous and file-backed parts (mapped shards, libraries)
  tokens/s           the trainer's own train/tokens_per_sec over steps 2..--steps
then the ratios: peak RSS (and anonymous RSS) largest/smallest size, prep s per million
tokens, current/baseline.
The module docstring (benchmarks/bench_corpus_size.py) says how each figure is measured."""

#: train.run flags the benchmark sets itself
OWN_TRAIN_FLAGS = ("--dataset", "--data-dir", "--cache-dir", "--runs-dir", "--run-name",
                   "--model", "--max-steps", "--log-every", "--resume", "--config",
                   "--synthetic")


def build_parser() -> argparse.ArgumentParser:
    first, _, rest = __doc__.partition("\n\n")
    p = Parser(prog=PROGRAM, allow_abbrev=False,
               description="How the input path scales with corpus size: generate corpora of "
                           "the given sizes, prepare each in a fresh process and train on it "
                           "for a fixed number of steps in another; wall time, peak RSS, "
                           "start-up and tokens/s, optionally beside a baseline commit.",
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=COLUMNS_HELP + "\n\nexamples:\n" + "\n".join(
                   ("  " if line.strip().startswith(PROGRAM) else "      ") + line.strip()
                   for line in rest.splitlines()
                   if line.strip().startswith(PROGRAM) or line.strip().startswith("--")))
    p.add_argument("--work-dir", required=True, type=Path, metavar="DIR",
                   help="where the corpora (reused), caches, runs, logs and the baseline's "
                        "worktree go")
    p.add_argument("--sizes", default="10M,50M,200M", type=size_list("--sizes"),
                   help="training tokens of each corpus, comma list with K/M/G suffixes "
                        "(default: 10M,50M,200M)")
    p.add_argument("--models", default="lstm,tcnlm", type=name_list(model_names(), "--models"),
                   help=f"models trained, out of {','.join(model_names())} "
                        "(default: lstm,tcnlm)")
    p.add_argument("--steps", type=integer(2), default=200,
                   help="optimiser steps of each training, at least 2: tokens/s is measured "
                        "over the steps after the first (default: 200)")
    corpus = p.add_argument_group("generated corpora")
    corpus.add_argument("--vocabulary", type=integer(100, MAX_VOCABULARY), default=50_000,
                        help="pseudo-words of the generator (default: 50,000)")
    corpus.add_argument("--topics", type=integer(1, 1000), default=50,
                        help="topic blocks of the generator (default: 50)")
    corpus.add_argument("--seed", type=random_seed, default=0,
                        help="seed of the generator (default: 0)")
    train = p.add_argument_group("training (flags of python -m train.run)")
    train.add_argument("--hidden-size", type=integer(1), default=256,
                       help="LSTM units (default: 256)")
    train.add_argument("--embedding-dim", type=integer(1), default=128,
                       help="word embedding size (default: 128)")
    train.add_argument("--batch-size", type=integer(1), default=64,
                       help="sequences per batch (default: 64)")
    train.add_argument("--seq-len", type=integer(1), default=30,
                       help="LM sequence length (default: 30)")
    train.add_argument("--train-flags", default="", metavar='"FLAGS"',
                       help="further train.run flags, after the ones above (so they win), "
                            'e.g. "--mode document --num-layers 2", for every model of '
                            "--models (a model's own option, such as --num-topics, needs "
                            "--models without the models that lack it); not "
                            + ", ".join(OWN_TRAIN_FLAGS) + " (the benchmark sets them); "
                            'one flag alone is written --train-flags="--flag"')
    base = p.add_argument_group("baseline")
    base.add_argument("--baseline", default=None, metavar="REF",
                      help="also measure the code of this commit (a git ref of the "
                           "repository), from a worktree under --work-dir")
    base.add_argument("--baseline-sizes", default=None, type=size_list("--baseline-sizes"),
                      help="the sizes (among --sizes) the baseline runs (default: those of "
                           "--sizes up to 50M)")
    base.add_argument("--baseline-timeout", type=integer(1), default=1800, metavar="SECONDS",
                      help="a baseline step running longer is killed and recorded as not "
                           "finished, with its peak RSS so far (default: 1800)")
    base.add_argument("--repository", type=Path, default=REPO_ROOT, metavar="DIR",
                      help="the git repository REF is taken from (default: this checkout)")
    p.add_argument("--timeout", type=integer(0), default=0, metavar="SECONDS",
                   help="a time limit for each step (preparation, training) of the current "
                        "code, as --baseline-timeout for the baseline's (default: 0, none)")
    p.add_argument("--output", type=Path, default=None, metavar="FILE",
                   help="also write every figure as JSON to FILE")
    return p


def split_train_flags(text: str) -> list[str]:
    """``--train-flags``' text as train.run arguments; a :class:`UserError` for text that
    does not split or that names a flag the benchmark sets itself (:data:`OWN_TRAIN_FLAGS`)."""
    try:
        flags = shlex.split(text)
    except ValueError as err:
        raise UserError(f"--train-flags {text!r}: {err}") from None
    own = [flag for flag in flags if flag.split("=", 1)[0] in OWN_TRAIN_FLAGS]
    if own:
        raise UserError(f"--train-flags: {', '.join(own)} is set by the benchmark itself; "
                        "leave it out")
    return flags


def write_report(path: Path | None, result: dict[str, Any]) -> None:
    """``result`` as JSON to ``path`` (``--output``; nothing for None), under a temporary
    name renamed into place, so that a reader never sees half of it."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, path)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags, checked: a bad value is a :class:`UserError` (one line)."""
    args = build_parser().parse_args(argv)
    args.train_flags = split_train_flags(args.train_flags)
    if args.baseline_sizes is None:
        args.baseline_sizes = [s for s in args.sizes if s <= 50 * 10**6]
    elif not set(args.baseline_sizes) <= set(args.sizes):
        extra = sorted(set(args.baseline_sizes) - set(args.sizes))
        raise UserError(f"--baseline-sizes {','.join(map(size_label, extra))}: not among "
                        f"--sizes {','.join(map(size_label, args.sizes))}")
    return args


def train_flags(args: argparse.Namespace) -> list[str]:
    """The train.run flags every training shares (beside dataset, paths and model)."""
    return ["--max-steps", str(args.steps), "--log-every", "1",
            "--hidden-size", str(args.hidden_size), "--embedding-dim", str(args.embedding_dim),
            "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len),
            *args.train_flags]


def check_train_flags(args: argparse.Namespace) -> None:
    """Parse and validate every training's flags with this checkout's train.run, before any
    corpus is generated: a bad one is a :class:`UserError` (its one line)."""
    import io

    from tcnlm_tf.cli.command_line import build_parser as train_parser
    from tcnlm_tf.cli.command_line import config_from_args

    for model in args.models:
        argv = ["--dataset", "generated", "--data-dir", str(args.work_dir), "--model", model,
                *train_flags(args)]
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                config_from_args(train_parser().parse_args(argv)).validate()
        except SystemExit:
            lines = [line for line in errors.getvalue().splitlines() if line.strip()]
            raise UserError(f"train.run flags of --model {model}: "
                            f"{lines[-1] if lines else 'refused by train.run'}") from None
        except UserError as err:
            raise UserError(f"train.run flags of --model {model}: {err}") from None


# ---------------------------------------------------------------------------- processes


@dataclasses.dataclass
class Measured:
    """One child process: its exit status (None: killed at the time limit), wall seconds,
    peak resident set (MB), spawn time (``time.time()``), log file, and the sampled peaks of
    its resident set's two parts: anonymous memory (what the process allocated) and
    file-backed pages (its mapped files and libraries: page cache the kernel can drop)."""

    status: int | None
    seconds: float
    peak_rss_mb: float
    started: float
    log: Path
    #: the sampled peaks of the anonymous and the file-backed resident set (MB)
    peak_anon_mb: float = 0.0
    peak_file_mb: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 0

    def problem(self, timeout: int) -> str | None:
        """None when it exited with 0; else what went wrong, in a few words."""
        if self.status is None:
            return f"did not finish in {timeout} s (peak RSS so far {self.peak_rss_mb:.0f} MB)"
        if self.status == 0:
            return None
        if self.status < 0:
            name = signal.Signals(-self.status).name
            cause = "; out of memory?" if self.status == -signal.SIGKILL else ""
            return f"killed by {name}{cause} (peak RSS {self.peak_rss_mb:.0f} MB)"
        return f"exit status {self.status}: {last_line(self.log)}"


def last_line_of(text: str) -> str:
    """The last non-blank line of ``text`` (a traceback's error line), at most 300
    characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def last_line(log: Path) -> str:
    """The last non-blank line of a log file."""
    try:
        return last_line_of(log.read_text(errors="replace"))
    except OSError:
        return "(no output)"


def high_water_mb(pid: int) -> float:
    """``VmHWM`` of a running process (its peak resident set so far), in MB; 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MB
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def child_env(root: Path) -> dict[str, str]:
    """The environment of a measured child: ``root``'s code first on the path, TensorFlow's
    log quiet, output unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    return env


#: the launcher of a measured command: ``python -c LAUNCHER REPORT ARGV...`` forks and execs
#: ARGV and writes to the file REPORT, as JSON, first the child's pid and start time, then
#: (every second, and at the end) the peaks of its anonymous and file-backed resident sets
#: so far (``RssAnon``/``RssFile`` of ``/proc/<pid>/status``, sampled every 50 ms, KiB),
#: at the end also its exit status and peak RSS (``ru_maxrss`` of ``os.wait4``, KiB); it
#: exits with the child's status (128 + N for signal N). A small process of its own, so that Linux's
#: ``ru_maxrss``, which counts the resident set a process had when it forked and exec'd
#: into its child's, holds a few MB of the launcher rather than the benchmark's own memory.
LAUNCHER = r"""
import json, os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.time()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
peak = {"anon_kib": 0, "file_kib": 0}
def write(**fields):
    with open(report + ".tmp", "w") as handle:
        json.dump({"pid": pid, "started": started, **peak, **fields}, handle)
    os.replace(report + ".tmp", report)
def sample():
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                for key, field in (("RssAnon:", "anon_kib"), ("RssFile:", "file_kib")):
                    if line.startswith(key):
                        peak[field] = max(peak[field], int(line.split()[1]))
    except (OSError, ValueError, IndexError):
        pass
write()
ticks = 0
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    sample()
    ticks += 1
    if ticks % 20 == 0:
        write()
    time.sleep(0.05)
code = os.waitstatus_to_exitcode(status)
write(status=code, maxrss_kib=usage.ru_maxrss)
sys.exit(code if code >= 0 else 128 - code)
"""


def read_report(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def kill_session(launcher: subprocess.Popen) -> None:
    """Kill the launcher and the command it runs (their process group) and reap the
    launcher."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait()


def run_measured(argv: list[str], root: Path, log: Path, timeout: int) -> Measured:
    """Run ``argv`` in ``root`` (its output to ``log``) under :data:`LAUNCHER`, in a session
    of its own: its exit status and peak RSS (the launcher's ``os.wait4``). After
    ``timeout`` seconds (0: none) the session is killed and the command recorded with
    status None and its ``VmHWM`` so far."""
    log.parent.mkdir(parents=True, exist_ok=True)
    report = log.with_suffix(".rusage.json")
    report.unlink(missing_ok=True)
    started, start = time.time(), time.perf_counter()
    with open(log, "wb") as output:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(report), *argv],
                                    cwd=root, env=child_env(root), stdout=output,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
    try:
        while launcher.poll() is None:
            if timeout and time.perf_counter() - start > timeout:
                pid = read_report(report).get("pid")
                so_far = high_water_mb(pid) if pid else 0.0
                kill_session(launcher)
                done = read_report(report)
                return Measured(None, time.perf_counter() - start, so_far,
                                done.get("started", started), log,
                                done.get("anon_kib", 0) * 1024 / MB,
                                done.get("file_kib", 0) * 1024 / MB)
            time.sleep(0.1)
    except BaseException:               # Ctrl-C: its own session does not get the signal
        kill_session(launcher)
        raise
    seconds = time.perf_counter() - start
    done = read_report(report)
    if "status" not in done:              # the launcher itself failed
        return Measured(launcher.returncode or 1, seconds, 0.0, started, log)
    return Measured(done["status"], seconds, done["maxrss_kib"] * 1024 / MB, done["started"],
                    log, done["anon_kib"] * 1024 / MB, done["file_kib"] * 1024 / MB)


# --------------------------------------------------------------------------- preparation

#: the preparation child: ``python -c PREPARE <train.run flags>``, run in the code's root;
#: prints one line ``PREPARED {json}``
PREPARE = r"""
import json, sys, time
import tcnlm_tf
from tcnlm_tf.cli.command_line import build_parser, config_from_args
from tcnlm_tf.data.loading import load_corpus

def rss_mb():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0

args = build_parser().parse_args(sys.argv[1:])
config = config_from_args(args)
config.validate()
before = rss_mb()
start = time.perf_counter()
corpus = load_corpus(config.data, cache_dir=args.cache_dir,
                     log=lambda message: print(message, file=sys.stderr))
seconds = time.perf_counter() - start
print("PREPARED " + json.dumps({
    "seconds": seconds, "rss_before_mb": before,
    "train_tokens": int(len(corpus.splits["train"].lm_ids)),
    "lm_vocabulary": len(corpus.lm_vocab), "topic_vocabulary": len(corpus.topic_vocab),
    "cache_path": str(corpus.cache_path), "code": tcnlm_tf.__file__}))
"""


def directory_bytes(path: Path) -> int:
    """The bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def child_report(log: Path, marker: str) -> dict[str, Any] | None:
    """The JSON a child printed after ``marker`` in its log, if any."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith(marker + " "):
            return json.loads(line[len(marker) + 1:])
    return None


def measure_preparation(root: Path, flags: list[str], cache: Path, log: Path,
                        timeout: int) -> dict[str, Any]:
    """Prepare the corpus of ``flags`` (train.run flags) with ``root``'s code into the fresh
    cache directory ``cache``: the row's preparation figures."""
    shutil.rmtree(cache, ignore_errors=True)
    measured = run_measured([sys.executable, "-c", PREPARE, *flags], root, log, timeout)
    report = child_report(log, "PREPARED") if measured.ok else None
    result = {"prep_status": measured.problem(timeout) or "ok",
              "prep_peak_rss_mb": measured.peak_rss_mb,
              "prep_peak_anon_mb": measured.peak_anon_mb,
              "prep_peak_file_mb": measured.peak_file_mb, "prep_process_s": measured.seconds,
              "prep_s": None, "cache_mb": None, "prep_log": str(log)}
    if measured.ok and report is None:
        result["prep_status"] = f"no PREPARED line in {log}"
    if report is not None:
        code = Path(report["code"]).resolve()
        if not code.is_relative_to(Path(root).resolve()):
            raise UserError(f"the preparation in {root} imported tcnlm_tf from {code}, not "
                            f"from {root}: is the package installed elsewhere?")
        result.update(prep_s=report["seconds"], prep_rss_before_mb=report["rss_before_mb"],
                      prepared_tokens=report["train_tokens"],
                      lm_vocabulary=report["lm_vocabulary"],
                      topic_vocabulary=report["topic_vocabulary"],
                      cache_bytes=directory_bytes(cache))
        result["cache_mb"] = result["cache_bytes"] / MB
    return result


# ------------------------------------------------------------------------------ training


def tfrecords(path: Path):
    """The records of a TFRecord file (a TensorBoard event file), CRCs not checked; a
    record cut short (a file still being written) ends it."""
    with open(path, "rb") as handle:
        while True:
            header = handle.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = handle.read(length)
            if len(data) < length or len(handle.read(4)) < 4:
                return
            yield data


def scalar_value(value) -> float:
    """A summary value's number (``simple_value`` or a scalar float tensor)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    tensor = value.tensor
    if tensor.float_val:
        return float(tensor.float_val[0])
    if tensor.double_val:
        return float(tensor.double_val[0])
    dtype = np.float64 if tensor.dtype == 2 else np.float32     # DT_DOUBLE, else DT_FLOAT
    return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])


def read_scalars(directory: Path, tag: str) -> list[tuple[int, float, float]]:
    """(step, wall time, value) of every event of ``tag`` under ``directory`` (TensorBoard
    event files), by step, the first of a step kept."""
    from tensorboard.compat.proto import event_pb2

    found: dict[int, tuple[float, float]] = {}
    for path in sorted(Path(directory).rglob("events.out.tfevents.*")):
        for record in tfrecords(path):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.tag == tag and event.step not in found:
                    found[event.step] = (event.wall_time, scalar_value(value))
    return [(step, *found[step]) for step in sorted(found)]


def throughput(events: list[tuple[int, float, float]], started: float
               ) -> tuple[float | None, float | None]:
    """(start-up seconds: from ``started`` to the first step's event; tokens/s over the
    steps after the first: their per-step rates weighted by the wall time between events)."""
    if not events:
        return None, None
    startup = events[0][1] - started
    later = [(wall - previous[1], rate) for previous, (_, wall, rate)
             in zip(events, events[1:])]
    seconds = sum(dt for dt, _ in later)
    if not later or seconds <= 0:
        return startup, None
    return startup, sum(dt * rate for dt, rate in later) / seconds


def measure_training(root: Path, flags: list[str], runs: Path, model: str, log: Path,
                     steps: int, timeout: int) -> dict[str, Any]:
    """Train ``model`` with ``root``'s code for the fixed steps of ``flags`` in a fresh run
    directory: the row's training figures."""
    run_dir = runs / model
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = [sys.executable, "-m", "train.run", *flags, "--runs-dir", str(runs),
            "--run-name", model, "--model", model]
    measured = run_measured(argv, root, log, timeout)
    events = read_scalars(run_dir / "tensorboard", "train/tokens_per_sec")
    startup, rate = throughput(events, measured.started)
    text = log.read_text(errors="replace") if log.is_file() else ""
    batches = re.search(r"epoch 1/\d+ \((\d+) batches", text)
    notes = []
    if re.search(r"^preparing ", text, re.MULTILINE):
        notes.append("train.run prepared the corpus again (its flags change the data "
                     "settings): start-up includes a preparation")
    if batches and steps > int(batches.group(1)):
        notes.append(f"{steps} steps pass the first epoch's {batches.group(1)} batches: "
                     "tokens/s includes a validation")
    return {"train_status": measured.problem(timeout) or "ok",
            "train_peak_rss_mb": measured.peak_rss_mb,
            "train_peak_anon_mb": measured.peak_anon_mb,
            "train_peak_file_mb": measured.peak_file_mb, "train_process_s": measured.seconds,
            "startup_s": startup, "tokens_per_sec": rate if measured.ok else None,
            "steps_logged": len(events),
            "epoch_batches": int(batches.group(1)) if batches else None,
            "train_notes": notes, "train_log": str(log)}


# ------------------------------------------------------------------------------ baseline


def git(repository: Path, *args: str) -> str:
    """``git -C repository args``' output; a failure is a :class:`UserError`."""
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(repository), *args],
                              capture_output=True, text=True, check=False)
    except OSError as err:
        raise UserError(f"cannot run git: {err}") from None
    if done.returncode:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise UserError(f"git {' '.join(args)} in {repository}: {message}")
    return done.stdout.strip()


def describe_code(root: Path) -> dict[str, Any]:
    """The commit a checkout is at and whether it has changes (read-only git calls)."""
    try:
        commit = git(root, "rev-parse", "HEAD")
        changed = bool(git(root, "status", "--porcelain", "--untracked-files=no"))
    except UserError:
        return {"root": str(root), "commit": None, "changed": None}
    return {"root": str(root), "commit": commit, "changed": changed}


def baseline_root(repository: Path, ref: str, work_dir: Path) -> tuple[Path, str]:
    """A worktree of ``ref`` under ``work_dir`` (created once, reused): (its path, the
    commit)."""
    try:
        commit = git(repository, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except UserError:
        raise UserError(f"--baseline {ref}: not a commit of the git repository {repository} "
                        "(a commit id, branch or tag; --repository DIR names another "
                        "repository)") from None
    path = (work_dir / f"baseline-{commit[:12]}").resolve()
    if (path / ".git").exists():
        if git(path, "rev-parse", "HEAD") != commit:
            raise UserError(f"{path} is not at {commit[:12]}: remove it (git worktree "
                            "remove) and run again")
        return path, commit
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repository, "worktree", "add", "--detach", str(path), commit)
    return path, commit


# ----------------------------------------------------------------------------- measuring


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_code(code: str, root: Path, spec: CorpusSpec, corpus: dict[str, Any],
                 args: argparse.Namespace, timeout: int) -> list[dict[str, Any]]:
    """One size with one code: the preparation, then each model's training; a row per
    model."""
    place = args.work_dir / "measured" / code / spec.name
    cache = place / "cache"
    data = ["--dataset", spec.name, "--data-dir", str(Path(corpus["path"]).parent),
            "--cache-dir", str(cache)]
    flags = [*data, *train_flags(args)]
    label = f"[{size_label(spec.tokens)} {code}]"
    progress(f"{label} preparing {spec.name} ...")
    prep = measure_preparation(root, [*flags, "--model", args.models[0]], cache,
                               place / "logs" / "prepare.log", timeout)
    progress(f"{label} preparation: {prep['prep_status']}, "
             f"{fmt(prep['prep_s'], 1)} s, peak RSS {prep['prep_peak_rss_mb']:.0f} MB")
    base = {"size": spec.tokens, "size_label": size_label(spec.tokens), "code": code,
            "corpus": spec.name, "tokens": corpus["splits"]["train"]["tokens"],
            "text_bytes": sum(s["bytes"] for s in corpus["splits"].values()), **prep}
    base["text_mb"] = base["text_bytes"] / MB
    rows = []
    for model in args.models:
        row = {**base, "model": model}
        if prep["prep_status"] != "ok":
            row.update(train_status="not run: the preparation did not succeed",
                       train_notes=[])
        else:
            progress(f"{label} training {model} for {args.steps} steps ...")
            row.update(measure_training(root, flags, place / "runs", model,
                                        place / "logs" / f"train-{model}.log", args.steps,
                                        timeout))
            progress(f"{label} {model}: {row['train_status']}, "
                     f"{fmt(row['tokens_per_sec'], 0)} tokens/s")
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- reporting


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def cell(row: dict[str, Any], key: str, status: str, digits: int = 1) -> str:
    """A figure, or why there is none ('dnf' for a step past its time limit, 'failed')."""
    if row.get(key) is not None:
        return fmt(row[key], digits)
    state = row.get(status) or ""
    return "dnf" if state.startswith("did not finish") else (
        "failed" if state not in ("ok", "") and not state.startswith("not run") else "-")


COLUMNS = ("size", "code", "model", "tokens", "text MB", "cache MB", "prep s",
           "prep peak RSS MB", "anon MB", "start-up s", "train peak RSS MB", "anon MB",
           "file MB", "tokens/s")


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for r in rows:
        trained = not r.get("train_status", "").startswith("not run")
        out.append((r["size_label"], r["code"], r["model"], f"{r['tokens']:,}",
                    fmt(r["text_mb"], 1), cell(r, "cache_mb", "prep_status"),
                    cell(r, "prep_s", "prep_status", 2),
                    fmt(r["prep_peak_rss_mb"], 0), fmt(r.get("prep_peak_anon_mb"), 0),
                    cell(r, "startup_s", "train_status", 1) if trained else "-",
                    fmt(r.get("train_peak_rss_mb"), 0) if trained else "-",
                    fmt(r.get("train_peak_anon_mb"), 0) if trained else "-",
                    fmt(r.get("train_peak_file_mb"), 0) if trained else "-",
                    cell(r, "tokens_per_sec", "train_status", 0) if trained else "-"))
    return out


def notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per step that did not succeed and per training note."""
    lines, seen = [], set()
    for r in rows:
        where = f"{r['size_label']} {r['code']}"
        if r["prep_status"] != "ok" and (where, "prep") not in seen:
            seen.add((where, "prep"))
            lines.append(f"{where} preparation: {r['prep_status']} (log {r['prep_log']})")
        status = r.get("train_status", "ok")
        if status != "ok" and not status.startswith("not run"):
            lines.append(f"{where} {r['model']} training: {status} (log {r['train_log']})")
        lines.extend(f"{where} {r['model']}: {note}" for note in r.get("train_notes", []))
    return lines


def summary(rows: list[dict[str, Any]], models: list[str]) -> dict[str, Any]:
    """The ratios of the module docstring, from the rows."""
    def find(size, code, model):
        return next((r for r in rows if (r["size"], r["code"], r["model"])
                     == (size, code, model)), None)

    current_sizes = sorted({r["size"] for r in rows if r["code"] == "current"})
    result: dict[str, Any] = {"peak_rss_ratio": {}, "peak_anon_ratio": {},
                              "prep_s_per_million_tokens": {},
                              "tokens_per_sec_current_over_baseline": {},
                              "peak_rss_current_over_baseline": {}}
    if len(current_sizes) > 1:
        small, large = current_sizes[0], current_sizes[-1]
        for memory in ("rss", "anon"):
            ratios = {"sizes": [size_label(small), size_label(large)]}
            low, high = find(small, "current", models[0]), find(large, "current", models[0])
            if low and high and low["prep_status"] == high["prep_status"] == "ok" \
                    and low[f"prep_peak_{memory}_mb"]:
                ratios["preparation"] = (high[f"prep_peak_{memory}_mb"]
                                         / low[f"prep_peak_{memory}_mb"])
            for model in models:
                low, high = find(small, "current", model), find(large, "current", model)
                if low and high and low.get("train_status") == high.get("train_status") \
                        == "ok" and low[f"train_peak_{memory}_mb"]:
                    ratios[f"training {model}"] = (high[f"train_peak_{memory}_mb"]
                                                   / low[f"train_peak_{memory}_mb"])
            result[f"peak_{memory}_ratio"] = ratios
    for code in CODES:
        per = {r["size_label"]: r["prep_s"] / (r["size"] / 1e6) for r in rows
               if r["code"] == code and r["prep_s"] is not None}
        if per:
            result["prep_s_per_million_tokens"][code] = per
    for r in rows:
        other = find(r["size"], "baseline", r["model"]) if r["code"] == "current" else None
        if other is None:
            continue
        if r.get("tokens_per_sec") and other.get("tokens_per_sec"):
            result["tokens_per_sec_current_over_baseline"].setdefault(
                r["size_label"], {})[r["model"]] = r["tokens_per_sec"] / other["tokens_per_sec"]
        memory = {}
        if r["prep_status"] == other["prep_status"] == "ok":
            memory["preparation"] = r["prep_peak_rss_mb"] / other["prep_peak_rss_mb"]
        if r.get("train_status") == other.get("train_status") == "ok":
            memory[f"training {r['model']}"] = (r["train_peak_rss_mb"]
                                                / other["train_peak_rss_mb"])
        if memory:
            result["peak_rss_current_over_baseline"].setdefault(
                r["size_label"], {}).update(memory)
    return result


def print_summary(result: dict[str, Any]) -> None:
    print("summary:")
    for memory, what in (("rss", "peak RSS"), ("anon", "peak anonymous RSS")):
        ratios = dict(result.get(f"peak_{memory}_ratio", {}))
        sizes = ratios.pop("sizes", None)
        if sizes and ratios:
            print(f"  {what} at {sizes[1]} / at {sizes[0]}, current code (goal: at most "
                  "1.20x): " + ", ".join(f"{name} {value:.2f}x"
                                         for name, value in ratios.items()))
        elif not sizes:
            print(f"  {what} ratio: needs at least two sizes")
    for code, per in result["prep_s_per_million_tokens"].items():
        print(f"  preparation seconds per million tokens, {code} (flat = linear): "
              + ", ".join(f"{label} {value:.2f}" for label, value in per.items()))
    for label, per in result["tokens_per_sec_current_over_baseline"].items():
        print(f"  tokens/s current / baseline at {label}: "
              + ", ".join(f"{model} {value:.2f}x" for model, value in per.items()))
    for label, per in result["peak_rss_current_over_baseline"].items():
        print(f"  peak RSS current / baseline at {label}: "
              + ", ".join(f"{name} {value:.2f}x" for name, value in per.items()))


def corpus_line(spec: CorpusSpec, corpus: dict[str, Any]) -> str:
    splits = corpus["splits"]
    how = ("reused" if corpus["reused"] else
           f"generated in {corpus['seconds']:.1f} s, "
           f"{sum(s['tokens'] for s in splits.values()) / max(corpus['seconds'], 1e-9) / 1e6:.1f}"
           " M tokens/s")
    return (f"  {size_label(spec.tokens)}: {corpus['path']}: train {splits['train']['tokens']:,}"
            f" tokens in {splits['train']['documents']:,} documents, valid "
            f"{splits['valid']['tokens']:,}, test {splits['test']['tokens']:,}; "
            f"{sum(s['bytes'] for s in splits.values()) / MB:.1f} MB of text ({how})")


def machine_description() -> str:
    """:func:`benchmarks.harness.machine_line`, computed in a child process (it imports
    TensorFlow, which the benchmark's own process does without)."""
    done = subprocess.run(
        [sys.executable, "-c", "from benchmarks.harness import machine_line; "
         "print(machine_line())"], cwd=REPO_ROOT, env=child_env(REPO_ROOT),
        capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return lines[-1]
    return f"machine: unknown ({last_line_of(done.stderr)})"


def code_line(code: str, info: dict[str, Any]) -> str:
    commit = info.get("commit")
    state = ("" if commit is None else f" at {commit[:12]}"
             + (" with uncommitted changes" if info.get("changed") else ""))
    return f"{code} code: {info['root']}{state}"


# ---------------------------------------------------------------------------------- main


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.work_dir = args.work_dir.expanduser().resolve()
    check_train_flags(args)
    roots = {"current": REPO_ROOT}
    codes = {"current": describe_code(REPO_ROOT)}
    if args.baseline is not None:
        roots["baseline"], commit = baseline_root(args.repository.resolve(), args.baseline,
                                                  args.work_dir)
        codes["baseline"] = {"root": str(roots["baseline"]), "ref": args.baseline,
                             "commit": commit, "changed": False}
    machine = machine_description()
    command = f"{PROGRAM} {shlex.join(argv)}".rstrip()
    corpora, rows = {}, []

    def report(complete: bool) -> dict[str, Any]:
        """Every figure so far, written to --output (after each size and code, so that a
        long run that stops leaves what it measured)."""
        result = {"machine": machine, "command": command, "complete": complete,
                  "codes": codes,
                  "settings": {k: (str(v) if isinstance(v, Path) else v)
                               for k, v in vars(args).items()},
                  "corpora": [{"size": size, **info} for size, info in corpora.items()],
                  "rows": rows, "summary": summary(rows, args.models)}
        write_report(args.output, result)
        return result

    for size in args.sizes:
        spec = CorpusSpec(size, args.vocabulary, args.topics, args.seed)
        progress(f"[{size_label(size)}] corpus {spec.name} ...")
        corpora[size] = ensure_corpus(args.work_dir / "corpora", spec)
        for code, root in roots.items():
            if code == "baseline" and size not in args.baseline_sizes:
                continue
            timeout = args.baseline_timeout if code == "baseline" else args.timeout
            rows.extend(measure_code(code, root, spec, corpora[size], args, timeout))
            report(complete=False)
    final = report(complete=True)
    print(machine)
    print(f"command: {command}")
    for code, info in codes.items():
        print(code_line(code, info))
    print("corpora:")
    for size in args.sizes:
        print(corpus_line(CorpusSpec(size, args.vocabulary, args.topics, args.seed),
                          corpora[size]))
    print(f"training: {args.steps} steps of train.run {shlex.join(train_flags(args))}")
    print()
    print_table(COLUMNS, table_rows(rows), left=3)
    for line in notes(rows):
        print(f"note: {line}")
    print()
    print_summary(final["summary"])
    if args.output is not None:
        print(f"\nwritten: {args.output}")
    return final


if __name__ == "__main__":
    main()
