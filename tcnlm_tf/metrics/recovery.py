"""Topic recovery: how well learned topics match the synthetic corpus's true topics.

The synthetic corpus (:mod:`tcnlm_tf.data.synthetic`) knows its generating topic-word matrix, so a
topic model trained on it can be scored directly: restrict the true topics [K, V1] and the
learned topics [T, V2] to the words both vocabularies contain, take the cosine similarity of
every (true, learned) pair, and pair topics one-to-one to maximise the total cosine with the
Hungarian method (Kuhn 1955, "The Hungarian method for the assignment problem"; Munkres 1957;
scipy's ``linear_sum_assignment`` implements the rectangular variant of Crouse 2016, "On
implementing 2D rectangular assignment algorithms"). With T >= K every true topic gets its own
learned topic; with T < K only T true topics can be matched.

Cosine similarity is scale-invariant, so rows need not be renormalised after dropping words
(such as ``<pad>`` or ``<unk>``) outside the shared vocabulary; a row left all zero has cosine 0
with everything.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from tcnlm_tf.errors import UserError


def _checked(matrix: np.ndarray, words: Sequence[str], name: str) -> np.ndarray:
    matrix = np.asarray(matrix, np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(words):
        raise UserError(f"{name} topic-word matrix has shape {matrix.shape} but its vocabulary "
                        f"has {len(words)} words; pass a [topics, vocabulary] matrix whose "
                        f"columns follow the word list")
    if matrix.shape[0] == 0:
        raise UserError(f"{name} topic-word matrix has no topics; pass at least one topic row")
    if len(set(words)) != len(words):
        raise UserError(f"{name} vocabulary lists a word more than once; pass a vocabulary "
                        f"with one column per distinct word")
    return matrix


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def topic_recovery(true_topic_word: np.ndarray, true_words: Sequence[str],
                   learned_topic_word: np.ndarray, learned_words: Sequence[str]) -> dict:
    """Match learned topics to true topics by maximum total cosine similarity.

    ``true_topic_word`` [K, V1] has columns in the order of ``true_words``;
    ``learned_topic_word`` [T, V2] in the order of ``learned_words``. Columns are aligned by
    word, not by position; words missing from either vocabulary are dropped.

    Returns ``{"matched": [(true_index, learned_index, cosine), ...] sorted by true index,
    "mean_matched_cosine": mean cosine over the min(K, T) matched pairs,
    "shared_vocab_size": int, "num_true": K, "num_learned": T}``.
    """
    true = _checked(true_topic_word, true_words, "true")
    learned = _checked(learned_topic_word, learned_words, "learned")
    learned_index = {w: i for i, w in enumerate(learned_words)}
    shared = [(i, learned_index[w]) for i, w in enumerate(true_words) if w in learned_index]
    if not shared:
        raise UserError("the true and learned topics share no vocabulary word; pass the "
                        "learned model's vocabulary for the same corpus the truth describes")
    true_columns, learned_columns = (list(columns) for columns in zip(*shared))
    cosine = _unit_rows(true[:, true_columns]) @ _unit_rows(learned[:, learned_columns]).T
    rows, cols = linear_sum_assignment(cosine, maximize=True)   # rows come back sorted
    matched = [(int(k), int(t), float(cosine[k, t])) for k, t in zip(rows, cols)]
    return {"matched": matched,
            "mean_matched_cosine": float(np.mean(cosine[rows, cols])),
            "shared_vocab_size": len(shared),
            "num_true": true.shape[0],
            "num_learned": learned.shape[0]}
