"""What the ``evaluate`` commands compute with a loaded run (see :mod:`tcnlm_tf.runs`).

* :func:`corpus_nll`: total NLL and predicted-token count of any documents (perplexity via
  :func:`tcnlm_tf.metrics.perplexity`), in the run's own mode.
* :func:`document_topics`: the topic model's t for whole documents (the posterior mean, or
  averaged samples when asked).
* :func:`generate`: sentences conditioned on a topic vector (Wang et al. 2018 §5.3: one-hot
  t = e_i uses only the i-th factor of W_b and U_b; any mixture works too), greedy or
  sampled with a temperature, stopping at ``<eos>`` or ``max_words`` words.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tcnlm_tf import pipeline
from tcnlm_tf.config import MAX_GENERATED_WORDS
from tcnlm_tf.corpus import Document
from tcnlm_tf.mixtures import topic_mixture
from tcnlm_tf.models.lstm import Context
from tcnlm_tf.runs import Run, encode_documents


def corpus_nll(run: Run, documents: list[Document], batch_size: int | None = None
               ) -> tuple[float, float]:
    """Total NLL (nats) and number of predicted tokens of ``documents`` under ``run``."""
    config = run.config
    arrays = encode_documents(run, documents)
    dataset = pipeline.make_dataset(
        arrays, config.data.seq_len, batch_size or config.train.batch_size, config.model.mode,
        config.data.max_bow if run.model.uses_bow else None)
    step = tf.function(lambda batch, state: run.model.loss_terms(batch, False, state),
                       reduce_retracing=True)
    nll, tokens, state = 0.0, 0.0, None
    for batch in dataset:
        terms = step(batch, state)
        state = terms["state"] if config.model.mode == "document" else None
        nll += float(terms["nll_sum"])
        tokens += float(terms["tokens"])
    return nll, tokens


def document_bow(run: Run, document: Document) -> np.ndarray:
    """The topic-vocabulary ids of a whole document, first ``max_bow`` kept: [max_bow]."""
    ids = [run.topic_vocab.index[w] for s in document for w in s if w in run.topic_vocab.index]
    bow = np.zeros(run.config.data.max_bow, np.int32)
    ids = ids[: len(bow)]
    bow[: len(ids)] = ids
    return bow


def document_topics(run: Run, documents: list[Document], samples: int = 0) -> np.ndarray:
    """Topic proportions t [N, T] of whole documents: the posterior mean (``samples=0``, the
    evaluation default) or the average of ``samples`` draws from q(theta|d)."""
    bow = tf.constant(np.stack([document_bow(run, d) for d in documents]))
    if samples <= 0:
        return run.model.infer_topics(bow, training=False)["topics"].numpy()
    draws = [run.model.infer_topics(bow, training=False, sample=True)["topics"].numpy()
             for _ in range(samples)]
    return np.mean(draws, axis=0)


def topic_vector(num_topics: int, topic: int | None = None,
                 mixture: dict[int, float] | None = None) -> np.ndarray:
    """t for generation as float32 [T] (see :func:`tcnlm_tf.mixtures.topic_mixture`)."""
    return np.asarray(topic_mixture(num_topics, topic, mixture), np.float32)


def generate(run: Run, topics: np.ndarray | None, num: int = 1, temperature: float = 1.0,
             greedy: bool = False, max_words: int = MAX_GENERATED_WORDS, seed: int = 0,
             allow_unk: bool = True) -> list[list[str]]:
    """``num`` sentences from ``<eos>`` and a zero state, conditioned on ``topics`` [T]
    (ignored by models without a topic model), until ``<eos>`` or ``max_words`` words;
    ``allow_unk=False`` never emits ``<unk>`` (renormalising over the other words)."""
    model, words = run.model, run.lm_vocab.words
    context = Context(topics=None if topics is None else
                      tf.constant(np.tile(topics[None], (num, 1)), tf.float32))
    rng = np.random.default_rng(seed)
    tokens = np.full((num, 1), pipeline.EOS_ID, np.int32)
    state, sentences, done = None, [[] for _ in range(num)], np.zeros(num, bool)
    for _ in range(max_words):
        hidden, state = model.encode(tf.constant(tokens), context, training=False, state=state)
        log_p = model.log_probs(hidden[:, -1], context).numpy().astype(np.float64)
        log_p[:, pipeline.PAD_ID] = -np.inf
        if not allow_unk:
            log_p[:, pipeline.UNK_ID] = -np.inf
        if greedy:
            nxt = log_p.argmax(-1)
        else:
            p = np.exp((log_p - log_p.max(-1, keepdims=True)) / temperature)
            p /= p.sum(-1, keepdims=True)
            nxt = np.array([rng.choice(len(row), p=row) for row in p])
        for i, token in enumerate(nxt):
            if not done[i] and token == pipeline.EOS_ID:
                done[i] = True
            elif not done[i]:
                sentences[i].append(words[token])
        if done.all():
            break
        tokens = nxt[:, None].astype(np.int32)
    return sentences
