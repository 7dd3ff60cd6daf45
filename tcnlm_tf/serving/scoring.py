"""Scoring a corpus through the ``score`` signature, one request row per sentence, with the
context the model was trained with (the export's ``context_kind``, see
:meth:`tcnlm_tf.serving.module.ServingModule.context_rule`): topic models get the rest of
the document (or the sentences before it, if trained with ``--context preceding``), a
document-mode LSTM and the LCLM the sentences before it, a sentence-mode LSTM nothing. The
total equals ``python -m evaluate.perplexity`` on the same documents. Used by
``evaluate.score`` and the Python API (:mod:`tcnlm_tf.serving.api`).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from tcnlm_tf.data.corpus import Document

#: the context kinds whose documents input is the text before the sentence
PRECEDING_KINDS = ("preceding-text", "preceding-sentences", "preceding-bag-of-words")


def sentence_requests(documents: list[Document], context_kind: str
                      ) -> tuple[list[str], list[str]]:
    """``(sentences, documents)`` inputs of the score signature, one row per sentence."""
    sentences, contexts = [], []
    for document in documents:
        for k, sentence in enumerate(document):
            if context_kind == "bag-of-words":
                context = document[:k] + document[k + 1:]
            elif context_kind in PRECEDING_KINDS:
                context = document[:k]
            else:
                context = []
            sentences.append(" ".join(sentence))
            contexts.append("\t".join(" ".join(s) for s in context))
    return sentences, contexts


def corpus_score(score: Callable[[list[str], list[str]], dict], documents: list[Document],
                 context_kind: str, batch_size: int = 64) -> dict[str, float | int | str]:
    """Total log-likelihood, token count and perplexity of ``documents``; ``score(sentences,
    contexts)`` answers one batch as the score signature does (``log_likelihood`` [B] and
    ``num_tokens`` [B], as arrays or tensors)."""
    sentences, contexts = sentence_requests(documents, context_kind)
    log_likelihood, tokens = 0.0, 0
    for start in range(0, len(sentences), batch_size):
        out = score(sentences[start:start + batch_size], contexts[start:start + batch_size])
        log_likelihood += float(np.sum(np.asarray(out["log_likelihood"], np.float64)))
        tokens += int(np.sum(out["num_tokens"]))
    return {"sentences": len(sentences), "tokens": tokens, "log_likelihood": log_likelihood,
            "perplexity": math.exp(-log_likelihood / tokens), "context": context_kind}
