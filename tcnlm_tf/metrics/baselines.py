"""Reference points printed beside every model: a unigram LM and, on the synthetic corpus,
the oracle (the true generating model), all through
:func:`tcnlm_tf.metrics.perplexity.perplexity`."""
from __future__ import annotations

import numpy as np

from tcnlm_tf.data import synthetic
from tcnlm_tf.data.corpus import read_corpus_file
from tcnlm_tf.data.loading import Corpus, SplitArrays
from tcnlm_tf.data.pipeline import EOS_ID, PAD_ID
from tcnlm_tf.data.sharded_array import chunks
from tcnlm_tf.data.vocab import UNK
from tcnlm_tf.metrics.perplexity import perplexity


def target_counts(split: SplitArrays, vocab_size: int, line_end: str = "eos") -> np.ndarray:
    """How often each id is a target: every word, plus one ``<eos>`` per sentence (none with
    ``line_end`` ``none``, stream mode only). A prepared split's stored counts, else counted
    a shard at a time."""
    counts = np.zeros(vocab_size, np.float64)
    if split.lm_counts is not None:
        counts[:len(split.lm_counts)] += split.lm_counts
    else:
        for piece in chunks(split.lm_ids):
            counts += np.bincount(piece, minlength=vocab_size)
    if line_end == "eos":
        counts[EOS_ID] += split.num_sentences
    return counts


def unigram_perplexity(corpus: Corpus, split: str = "test", smoothing: float = 1.0,
                       line_end: str = "eos") -> float:
    """Perplexity on ``split`` of an add-``smoothing`` unigram model fit on the train split
    (over every id but padding, ``<unk>`` and ``<eos>`` included; with ``line_end`` ``none``
    no ``<eos>`` is a target, so it keeps only its smoothing count)."""
    vocab_size = len(corpus.lm_vocab)
    train = target_counts(corpus.splits["train"], vocab_size, line_end) + smoothing
    train[PAD_ID] = 0.0
    log_p = np.log(train / train.sum(), where=train > 0, out=np.zeros_like(train))
    counts = target_counts(corpus.splits[split], vocab_size, line_end)
    return perplexity(-(counts * log_p).sum(), counts.sum())


def oracle_perplexity(corpus: Corpus, split: str = "test") -> float | None:
    """Exact perplexity of the true generating model (synthetic corpus only, else None),
    in the LM's token space: words outside the LM vocabulary count as ``<unk>``."""
    if corpus.name != "synthetic":
        return None
    truth = synthetic.load_truth(corpus.source_dir)
    documents, _ = read_corpus_file(corpus.source_dir / f"{split}.txt")
    vocab = corpus.lm_vocab
    nll, count = synthetic.oracle_log_probs(
        truth, split, documents, token_of=lambda w: w if w in vocab else UNK)
    return perplexity(nll, count)
