"""What the ``evaluate`` commands compute with a loaded run (see :mod:`tcnlm_tf.runs.loading`).

* :func:`corpus_nll`: total NLL and predicted-token count of any documents (perplexity via
  :func:`tcnlm_tf.metrics.perplexity.perplexity`), in the run's own mode, through
  :func:`summed_nll`, the evaluation loop the trainer's validation runs too.
* :func:`document_topics`: a topic model's topic proportions for whole documents (the
  posterior mean, or averaged samples when asked).
* :func:`generate`: sentences conditioned on a topic vector (one-hot for one topic, or any
  mixture; Wang et al. 2018 §5.3, Lau et al. 2017 §7) through the one generator,
  :func:`tcnlm_tf.serving.generation.generate_ids`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np
import tensorflow as tf

from tcnlm_tf.config import CONTEXTS, MAX_GENERATED_WORDS, carries_state
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.corpus import Document
from tcnlm_tf.data.pipeline import UNK_ID
from tcnlm_tf.data.vocab import PAD
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.base import Context, LanguageModel, has_topics
from tcnlm_tf.runs.loading import Run, encode_documents
from tcnlm_tf.serving.generation import beam_ids, generate_ids
from tcnlm_tf.serving.mixtures import topic_mixture
from tcnlm_tf.tracing import any_batch_size


#: what the LM is conditioned on at evaluation: the topics the model infers from each
#: sentence's context (the run's protocol), or an ablation: another document's (shuffled) or
#: uninformative topics ("uniform": proportions 1/T, Topic-RNN's theta at its prior mean 0;
#: ``TopicModel.uninformative_topics``)
TOPIC_SOURCES = ("inferred", pipeline.SHUFFLED, "uniform")


def _check_topic_source(run: Run, topics: str) -> None:
    if topics not in TOPIC_SOURCES:
        raise ValueError(f"unknown topic source {topics!r}; choose one of {TOPIC_SOURCES}")
    model = run.config.model.model
    if topics == "uniform" and not has_topics(run.model):
        raise UserError(f"uniform topics need a model with topics; --model {model} has none")
    if topics == pipeline.SHUFFLED and not run.model.context_spec.reads("document"):
        raise UserError(f"shuffled topics need a model that reads its document's bag of "
                        f"words; --model {model} does not")


def uninformative_context(run: Run, batch: dict[str, tf.Tensor]) -> Context:
    """The context of the model's uninformative topics (uniform proportions 1/T; see
    ``TopicModel.uninformative_topics``) for every example of ``batch``."""
    return run.model.topic_context(
        run.model.uninformative_topics(tf.shape(batch["inputs"])[0]))


def _check_context(run: Run, context: str | None, topics: str) -> None:
    if context is None:
        return
    if context not in CONTEXTS:
        raise ValueError(f"unknown context protocol {context!r}; choose one of {CONTEXTS}")
    model = run.config.model.model
    if run.config.model.mode != "sentence" or not run.model.context_spec.reads("document"):
        raise UserError(f"a context protocol needs a sentence-mode model that reads its "
                        f"document's bag of words; --model {model} (mode "
                        f"{run.config.model.mode}) does not, so its perplexity is the same "
                        "under both: leave the protocol out")
    if topics == pipeline.SHUFFLED:
        raise UserError("shuffled topics read the whole of another document, under no context "
                        "protocol: leave the protocol out")


def corpus_nll(run: Run, documents: list[Document], batch_size: int | None = None,
               split: str | None = None, topics: str = "inferred",
               context: str | None = None) -> tuple[float, float]:
    """Total NLL (nats) and number of predicted tokens of ``documents`` under ``run``;
    ``split``: which split of the run's corpus they are (None: another text); ``topics``:
    one of :data:`TOPIC_SOURCES` (the ablations replace what the LM is conditioned on, not
    how the text is scored); ``context``: the context protocol of the evaluation
    (:data:`~tcnlm_tf.config.CONTEXTS`; None: the run's own), e.g. ``preceding`` for a run
    trained under ``rest``, as Zheng, Vafa and Blei (2023) score TDLM and Topic-RNN: their
    code trains both on the document minus the current sequence and evaluates them on the
    text before it (revisiting-tglms, ``train.py``'s training step and ``evaluate``)."""
    _check_topic_source(run, topics)
    _check_context(run, context, topics)
    config = run.config
    arrays = encode_documents(run, documents)
    dataset = pipeline.model_dataset(
        run.model, config, arrays, split, batch_size,
        protocol=pipeline.SHUFFLED if topics == pipeline.SHUFFLED else context)
    if topics == "uniform":
        terms = tf.function(lambda batch, state: run.model.loss_terms(
            batch, False, state, context=uninformative_context(run, batch)),
            reduce_retracing=True, autograph=False)
    else:
        terms = tf.function(lambda batch, state: run.model.loss_terms(batch, False, state),
                            reduce_retracing=True, autograph=False)
    terms = any_batch_size(terms)       # one trace for the full batches and the last one

    def step(batch, state):
        out = terms(batch, state)
        return out, out["state"]

    return summed_nll(step, dataset, zero_lanes(run.model) if carries_state(config) else None)


def zero_lanes(model: LanguageModel) -> Callable[[dict[str, tf.Tensor]], Any]:
    """``batch -> model.zero_state(rows of batch)``: the state a stateful run's first batch
    starts from (each of its lanes at the start of a document)."""
    return lambda batch: model.zero_state(tf.shape(batch["inputs"])[0])


def summed_nll(step: Callable[[Any, Any], tuple[dict, Any]], batches: Iterable,
               first_state: Callable[[Any], Any] | None) -> tuple[float, float]:
    """The one evaluation loop (the trainer's validation and test, :func:`corpus_nll`):
    total NLL and predicted tokens of ``batches``, ``step(batch, state) -> (sums, new
    state)`` with ``sums["nll_sum"]`` and ``sums["tokens"]``. Where the batches carry the
    state (document and stream mode), ``first_state(batch)`` gives the zero state the first
    batch starts from and each later batch continues the previous one's; elsewhere
    (``first_state`` None) every batch starts from None (zeros). A zero state rather than
    None for the first batch keeps ``step`` to one trace (:mod:`tcnlm_tf.tracing`)."""
    nll, tokens, state = 0.0, 0.0, None
    for batch in batches:
        if first_state is not None and state is None:
            state = first_state(batch)
        sums, new_state = step(batch, state)
        state = new_state if first_state is not None else None
        nll += float(sums["nll_sum"])
        tokens += float(sums["tokens"])
    return nll, tokens


def document_batch(run: Run, documents: list[Document]) -> dict[str, tf.Tensor]:
    """The context fields the model reads, for whole documents (nothing left out; the
    ``preceding`` sentences are each document's last ones)."""
    return pipeline.split_context(run.model.context_spec, encode_documents(run, documents))


def empty_context(run: Run, num: int) -> Context:
    """The model's context for ``num`` empty documents: what a model without topics
    generates from (``Context()`` for a model without document context)."""
    if not run.model.context_inputs:
        return Context()
    return run.model.context(document_batch(run, [[] for _ in range(num)]), training=False)


def document_topics(run: Run, documents: list[Document], samples: int = 0) -> np.ndarray:
    """Topic proportions [N, T] of whole documents: the model's point estimate (``samples=0``,
    the evaluation default) or, for a model with a posterior, the average of ``samples``
    draws from it."""
    batch = document_batch(run, documents)
    if samples <= 0:
        return run.model.infer_topics(batch, training=False).numpy()
    draws = [run.model.infer_topics(batch, training=False, sample=True).numpy()
             for _ in range(samples)]
    return np.mean(draws, axis=0)


def topic_vector(num_topics: int, topic: int | None = None,
                 mixture: dict[int, float] | None = None) -> np.ndarray:
    """t for generation as float32 [T] (see :func:`tcnlm_tf.serving.mixtures.topic_mixture`)."""
    return np.asarray(topic_mixture(num_topics, topic, mixture), np.float32)


def generate(run: Run, topics: np.ndarray | None, num: int = 1, temperature: float = 1.0,
             greedy: bool = False, max_words: int = MAX_GENERATED_WORDS, seed: int = 0,
             allow_unk: bool = True, top_k: int = 0, top_p: float = 1.0, beams: int = 0,
             prompt: list[str] = ()) -> list[list[str]]:
    """``num`` sentences conditioned on ``topics`` [T] (a topic model) or on nothing (None:
    an empty document, :func:`empty_context`), each continuing the words of ``prompt``,
    until ``<eos>`` or ``max_words`` words (the prompt's not counted); ``allow_unk=False``
    never emits ``<unk>``. Sampled with ``top_k``/``top_p``
    (:func:`~tcnlm_tf.serving.generation.filter_logits`), or with ``beams`` >= 2 the best
    of a beam search (:func:`~tcnlm_tf.serving.generation.beam_ids`)."""
    model = run.model
    context = (model.topic_context(tf.constant(np.tile(topics[None], (num, 1)), tf.float32))
               if topics is not None and has_topics(model) else empty_context(run, num))
    ids = [UNK_ID if w == PAD else run.lm_vocab.id(w) for w in prompt]   # as the export reads
    prompts = {"prompt_ids": tf.constant([ids] * num,
                                         tf.int32, shape=[num, len(prompt)]),
               "prompt_lengths": tf.fill([num], len(prompt))}
    if beams >= 2:
        out = tf.function(lambda: beam_ids(model, context, tf.constant(num), beams, max_words,
                                           allow_unk, **prompts), autograph=False)()
    else:
        out = tf.function(lambda: generate_ids(
            model, context, tf.constant(num), tf.constant(seed, tf.int64),
            tf.constant(0.0 if greedy else temperature), max_words, allow_unk, top_k, top_p,
            **prompts), autograph=False)()
    ids, lengths = out["ids"].numpy(), out["num_tokens"].numpy()
    return [[run.lm_vocab.words[i] for i in row[:n]] for row, n in zip(ids, lengths)]
