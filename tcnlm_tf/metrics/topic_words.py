"""The learned topics as words: every topic's word distribution beside the words of its
columns, each topic's most probable words, and the Markdown table of them that TensorBoard's
Text tab shows.

A topic model (:class:`tcnlm_tf.models.base.TopicModel`) gives its topics through
``topic_word()``, [T, V'], over the words of its ``topic_vocabulary``: the topic-model
vocabulary (``"topic"``) or the LM vocabulary (``"lm"``). Its rows are TCNLM's beta (Wang et
al. 2018, eq. 6), TDLM's softmax(B W + b) (Lau et al. 2017, Sec. 5), the fitted LDA's
topic-word distributions and Topic-RNN's softmax of each column of B over the content words.
The training loop (a table per epoch) and the evaluators (``evaluate.topics``,
``evaluate.coherence``, ``evaluate.recovery``, ``evaluate.infer``) read the topics here.
Imports nothing of the project: the model and the vocabularies are passed in.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def topic_word_matrix(model: Any, lm_vocab: Any, topic_vocab: Any
                      ) -> tuple[np.ndarray, list[str]]:
    """The topics of ``model`` (a topic model) as word distributions, beta [T, V'], and the
    V' words of its columns: ``lm_vocab``'s or ``topic_vocab``'s words (each a
    :class:`~tcnlm_tf.data.vocab.Vocabulary`), by the model's ``topic_vocabulary``."""
    vocab = lm_vocab if model.topic_vocabulary == "lm" else topic_vocab
    return np.asarray(model.topic_word()), list(vocab.words)


def is_special(word: str) -> bool:
    """Whether ``word`` is a special token (``<pad>``, ``<eos>``, ``<unk>``)."""
    return word.startswith("<") and word.endswith(">")


def top_words(beta: np.ndarray, words: Sequence[str], n: int) -> list[list[str]]:
    """The ``n`` most probable words of each topic of ``beta`` [T, V'] (columns: ``words``),
    most probable first; special tokens are never listed."""
    beta = np.array(beta, copy=True)
    beta[:, [i for i, word in enumerate(words) if is_special(word)]] = -np.inf
    order = np.argsort(-beta, axis=1)[:, :n]
    return [[words[i] for i in row] for row in order]


def model_top_words(model: Any, lm_vocab: Any, topic_vocab: Any, n: int) -> list[list[str]]:
    """:func:`top_words` of ``model``'s topics (:func:`topic_word_matrix`)."""
    return top_words(*topic_word_matrix(model, lm_vocab, topic_vocab), n)


def markdown_table(topics: Sequence[Sequence[str]]) -> str:
    """The topics' top words as a Markdown table, one row per topic: ``| k | w1 w2 ... |``."""
    return "| topic | top words |\n| --- | --- |\n" + "\n".join(
        f"| {k} | {' '.join(words)} |" for k, words in enumerate(topics))


def topic_labels(topics: Sequence[Sequence[str]]) -> list[str]:
    """One label per topic, ``topic k: w1 w2 ...`` (the projector's metadata of a topic)."""
    return [f"topic {k}: {' '.join(words)}" for k, words in enumerate(topics)]
