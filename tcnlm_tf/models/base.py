"""The contract every language model in this project follows.

A model is a ``keras.Model`` whose ``call(batch, training, state)`` takes a batch dict (see
:mod:`tcnlm_tf.data.pipeline`) and returns a :class:`ModelOutput`: the log-probability of every
target, the state to carry to the next batch (document mode) and any auxiliary loss. The
training loop, the evaluators, serving and the perplexity computation only ever see the
contract :class:`LanguageModel` declares, so a new model is one subclass plus a registry
entry (:mod:`tcnlm_tf.models.registry`). Besides ``call`` and ``loss_terms`` (scoring),
generation and serving step through a model with ``zero_state``, ``encode``,
``log_probs`` and ``target_log_prob`` (the recurrent skeleton,
:class:`tcnlm_tf.models.lstm.RecurrentLanguageModel`, implements them for every model of
the project). What a subclass can tell the generic code:

* ``create(config, lm_vocab, topic_vocab, run_dir)``: build itself from a run's configuration;
* ``context_inputs``: which document-context fields its batches need (``"bow"``: the
  topic-vocabulary ids of the document minus the sentence; ``"preceding"``: those of each
  preceding sentence; any field of :data:`tcnlm_tf.data.pipeline.CONTEXT_FIELDS`), and
  ``context_options``: the sizes the pipeline makes them with; the generic code reads both
  through ``context_spec``;
* ``document_features(split, arrays)``: per-document side inputs of a split (TDLM's tags),
  added to each example's batch row;
* ``context(batch)``: what it derives from them, as an open :class:`Context`;
* ``prepare(corpus, run_dir, log)``: one-off work on a fresh run (pre-trained embeddings,
  fitting a model on the corpus, writing files to the run directory);
* ``tasks()``: further training tasks with their own batches and optimiser (:class:`Task`);
* ``embedding_tables()``: its word-embedding tables, each with the vocabulary of its rows
  (what ``--embeddings`` initialises and TensorBoard's projector shows);
* :class:`TopicModel`: the interface of models that have topics.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import keras
import tensorflow as tf

if TYPE_CHECKING:
    import numpy as np

    from tcnlm_tf.config import DataConfig, RunConfig
    from tcnlm_tf.data.loading import Corpus, SplitArrays
    from tcnlm_tf.data.pipeline import ContextSpec
    from tcnlm_tf.data.vocab import Vocabulary


def token_nll(target_log_probs: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """[B, L]: each target's negative log-likelihood times its weight, 0 where the weight is
    0 (``tf.where``, not a product: a padded position may carry log p = -inf)."""
    return tf.where(weights > 0, -target_log_probs * weights, 0.0)


@dataclasses.dataclass
class ModelOutput:
    """``target_log_probs`` [B, L]: log p(target_t | history, context) (any value where
    padded: the loss masks those positions out with ``weights``); ``state``: nested tensors
    to carry, or None;
    ``aux_loss``: a scalar *sum over the batch's examples* of any further loss (e.g. the
    negative topic-model part of the ELBO), added to the summed NLL before the training loop
    divides by the global number of predicted tokens (0 for plain LMs); ``aux_metrics``:
    named scalar sums over examples, logged to TensorBoard divided by the example count."""

    target_log_probs: tf.Tensor
    state: Any = None
    aux_loss: tf.Tensor | float = 0.0
    aux_metrics: dict[str, tf.Tensor] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Context:
    """What a model derives from a batch's document context before running the LM.

    ``tensors``: named tensors with one row per example ([B, ...]; e.g. TCNLM's topic
    proportions ``topics``, TDLM's topic vector ``topic_vector``), whatever the model needs;
    the generic code never looks inside, it only repeats or picks rows (:meth:`repeat`,
    :meth:`rows`). ``aux_loss`` and ``aux_metrics`` as in :class:`ModelOutput`."""

    tensors: Mapping[str, tf.Tensor] = dataclasses.field(default_factory=dict)
    aux_loss: tf.Tensor | float = 0.0
    aux_metrics: dict[str, tf.Tensor] = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str) -> tf.Tensor:
        return self.tensors[name]

    def repeat(self, times: tf.Tensor | int) -> "Context":
        """Each row repeated ``times`` times in place (rows of example i, then of i+1 ...)."""
        return Context({k: tf.repeat(v, times, axis=0) for k, v in self.tensors.items()})

    def rows(self, index: tf.Tensor) -> "Context":
        """The rows ``index`` [M] of every tensor ([B, ...] -> [M, ...]; e.g. each scored
        position's example), without ``aux_loss`` and ``aux_metrics``; each tensor is
        gathered when it is read (a [B, N, e] context the output layer never reads costs
        nothing)."""
        return Context(_Rows(self.tensors, index))


class _Rows(Mapping):
    """``tensors`` with each one's rows ``index`` taken as it is read (:meth:`Context.rows`)."""

    def __init__(self, tensors: Mapping[str, tf.Tensor], index: tf.Tensor):
        self._tensors, self._index = tensors, index

    def __getitem__(self, name: str) -> tf.Tensor:
        return tf.gather(self._tensors[name], self._index)

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


@dataclasses.dataclass
class Task:
    """A training task a model runs beside language modelling, with its own optimiser
    (e.g. TDLM's topic model, Lau et al. 2017 Sec. 3.3).

    ``batches(split, arrays, batch_size, shuffle_seed)``: a ``tf.data.Dataset`` of batch
    dicts for the split named ``split`` with :class:`~tcnlm_tf.data.loading.SplitArrays` ``arrays``
    (shuffled by the seed, one order per seed);
    ``loss_terms(batch, training)``: ``{"loss_sum": summed loss, "count": how many items it
    sums over, "metrics": {name: sums}}`` for one per-replica batch (the loop divides by the
    global count); ``variables()``: what its optimiser updates; ``order``: ``"shuffled"``
    (its batches are shuffled among the language model's in one random order per epoch) or
    ``"after"`` (they follow the epoch's other batches); ``clip``: clip its gradients to the
    run's global norm, as the language model's are; ``validate``: also run it on the
    validation split after each epoch and log its loss and metrics (each per count, e.g. a
    classifier's ``correct`` as accuracy)."""

    name: str
    batches: Callable[[str, "SplitArrays", int, int | None], tf.data.Dataset]
    loss_terms: Callable[[dict[str, tf.Tensor], bool], dict[str, Any]]
    variables: Callable[[], list]
    order: str = "shuffled"
    clip: bool = False
    validate: bool = False


class LanguageModel(keras.Model):
    """Base class: subclasses implement ``create`` and ``call`` and, where they need them,
    the hooks below."""

    #: batch fields of document context the model reads (see tcnlm_tf.data.pipeline)
    context_inputs: tuple[str, ...] = ()
    #: V, the size of the LM vocabulary it predicts
    vocab_size: int
    _context_spec: "ContextSpec | None" = None

    def __init__(self, **kwargs):
        # The model itself computes in float32 whatever the precision its layers were built
        # under (tcnlm_tf.precision): Keras casts a layer's floating inputs to its compute
        # dtype, and the batch's weights, the loss sums and the carried state stay float32.
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    @property
    def context_options(self) -> dict[str, Any]:
        """Sizes and choices of the context fields that the model sets (``preceding``:
        ``sentences`` N and ``words`` W; ``context_weight``: ``weighting``), the ``options``
        of its :attr:`context_spec`; none by default."""
        return {}

    @property
    def context_spec(self) -> "ContextSpec":
        """The document context of the model's batches, built once
        (:class:`tcnlm_tf.data.pipeline.ContextSpec`): its ``context_inputs`` made with its
        ``context_options``, with the run's ``max_bow`` and context protocol once
        :meth:`configure_context` has set them (:func:`tcnlm_tf.models.build_model` does),
        else with the defaults."""
        if self._context_spec is None:
            from tcnlm_tf.data.pipeline import ContextSpec
            self._context_spec = ContextSpec(self.context_inputs,
                                             options=dict(self.context_options))
        return self._context_spec

    def configure_context(self, data: "DataConfig") -> None:
        """Build :attr:`context_spec` for a run's data configuration ``data``."""
        from tcnlm_tf.data.pipeline import ContextSpec
        self._context_spec = ContextSpec(self.context_inputs, data.max_bow,
                                         dict(self.context_options), data.context)

    @classmethod
    def create(cls, config: "RunConfig", lm_vocab: "Vocabulary", topic_vocab: "Vocabulary",
               run_dir: Path | None = None) -> "LanguageModel":
        """A fresh, unbuilt model for a run's configuration and vocabularies; ``run_dir``
        holds the files a run keeps for its model (e.g. an SDLM decoder's knowledge base)."""
        raise NotImplementedError

    def build(self, input_shape: Any) -> None:
        """Nothing to create up front: each sub-layer builds itself on the first call.
        (Without this Keras tries a symbolic trace of ``call`` on the batch dict first.)"""
        self.built = True

    def prepare(self, corpus: "Corpus", run_dir: Path, log: Callable[[str], None]) -> None:
        """One-off work for a fresh run, after the variables exist and before training
        (nothing by default). Whatever it sets must live in the model's weights or files in
        ``run_dir``: a resumed or reloaded run does not call it again."""

    def document_features(self, split: str | None, arrays: "SplitArrays"
                          ) -> dict[str, "np.ndarray"]:
        """Per-document inputs {name: [D, ...]} of the corpus split ``split`` (None: a text
        file that is no split of the run's corpus); none by default."""
        return {}

    def tasks(self) -> list[Task]:
        """Training tasks besides language modelling (none by default)."""
        return []

    def embedding_tables(self) -> list[tuple[Any, str]]:
        """The model's word-embedding tables as ``(variable [words, e], vocabulary)``, with
        vocabulary ``"lm"`` or ``"topic"``: row i is word i of the run's LM or topic
        vocabulary (none by default)."""
        return []

    def weight_scales(self, variables: list) -> list[float]:
        """For each of ``variables``: the constant ``s`` by which the model multiplies it
        where it is used (a sub-layer's ``scaled_weights()``, e.g. TCNLM's ``W_b``/``U_b``
        and the topic model's word weights), 1 for the others. The gradient of the weight
        the model really uses, ``s * v``, is ``v``'s gradient / ``s``."""
        scales = {}
        for layer in self._flatten_layers(include_self=False):
            for variable, scale in getattr(layer, "scaled_weights", list)():
                scales[id(variable)] = float(scale)
        return [scales.get(id(v), 1.0) for v in variables]

    def call(self, batch: dict[str, tf.Tensor], training: bool = False,
             state: Any = None, context: "Context | None" = None) -> ModelOutput:
        """The outputs for ``batch``; ``context``: the :class:`Context` to condition on
        instead of the one :meth:`context` derives from the batch (an ablation, e.g. a topic
        model at uniform topics)."""
        raise NotImplementedError

    # ------------------------------------------------ stepping (generation, serving)
    def context(self, batch: dict[str, tf.Tensor], training: bool = False) -> Context:
        """What the batch's document-context fields contribute (nothing by default)."""
        return Context()

    def zero_state(self, batch_size: tf.Tensor) -> Any:
        """The state a sequence starts from, for ``batch_size`` rows (nested tensors)."""
        raise NotImplementedError

    def encode(self, inputs: tf.Tensor, context: Context, training: bool = False,
               state: Any = None, reset: tf.Tensor | None = None) -> tuple[tf.Tensor, Any]:
        """The hidden vectors the output layer reads, [B, L, H], for ``inputs`` [B, L] from
        ``state`` (None: :meth:`zero_state`; ``reset`` [B]: 1 zeroes a row's state), and the
        state after the last step."""
        raise NotImplementedError

    def log_probs(self, hidden: tf.Tensor, context: Context) -> tf.Tensor:
        """Next-word log-probabilities [..., V] of hidden vectors [..., H]."""
        raise NotImplementedError

    def target_log_prob(self, hidden: tf.Tensor, targets: tf.Tensor, context: Context,
                        training: bool = False) -> tf.Tensor:
        """log p(target) [...] of ``targets`` [...] given hidden vectors [..., H] (what
        :meth:`log_probs` gives, picked at the targets; a model may compute it faster)."""
        raise NotImplementedError

    def loss_terms(self, batch: dict[str, tf.Tensor], training: bool = False,
                   state: Any = None, context: "Context | None" = None) -> dict[str, Any]:
        """Summed quantities for one (per-replica) batch: ``nll_sum`` (total NLL of the real
        targets), ``tokens`` (their count), ``examples`` (rows), ``aux_loss``,
        ``aux_metrics`` and the new ``state``, and ``target_nll`` [B, L], each target's NLL
        (0 at padding; what per-document scores sum); ``context`` as in :meth:`call` (passed
        on only when given, so a model whose ``call`` takes no ``context`` still trains and
        scores)."""
        if context is None:
            out = self(batch, training=training, state=state)
        else:
            out = self(batch, training=training, state=state, context=context)
        weights = batch["weights"]
        target_nll = token_nll(out.target_log_probs, weights)
        return {
            "nll_sum": tf.reduce_sum(target_nll),
            "target_nll": target_nll,
            "tokens": tf.reduce_sum(weights),
            "examples": tf.cast(tf.shape(weights)[0], tf.float32),
            "aux_loss": tf.convert_to_tensor(out.aux_loss, tf.float32),
            "aux_metrics": out.aux_metrics,
            "state": out.state,
        }


class TopicModel:
    """The interface of a language model with topics (mixed into its class).

    ``num_topics`` T; :meth:`infer_topics` a document's topic distribution from the batch's
    context fields; :meth:`topic_word` every topic as a distribution over the words of
    ``topic_vocabulary`` (``"topic"``: the topic-model vocabulary, ``"lm"``: the LM
    vocabulary); :meth:`topic_context` the context that conditions the LM on a given topic
    vector (a one-hot row for one topic, as both papers generate from a topic);
    :meth:`uninformative_topics` the topic vector that says nothing about a document (the
    ``uniform`` ablation)."""

    num_topics: int
    topic_vocabulary: str = "topic"

    def infer_topics(self, batch: dict[str, tf.Tensor], training: bool = False,
                     sample: bool | None = None) -> tf.Tensor:
        """Topic proportions [B, T] of the documents in ``batch`` (its context fields)."""
        raise NotImplementedError

    def topic_word(self) -> tf.Tensor:
        """Word distributions of the topics: [T, size of ``topic_vocabulary``]."""
        raise NotImplementedError

    def topic_context(self, topics: tf.Tensor) -> Context:
        """The context for topic proportions ``topics`` [B, T]."""
        raise NotImplementedError

    def uninformative_topics(self, rows: tf.Tensor) -> tf.Tensor:
        """``rows`` copies of the topic vector that carries no information about a document,
        [rows, T]: uniform proportions 1/T for models whose topic vector is a distribution
        over topics."""
        return tf.fill([rows, self.num_topics], 1.0 / self.num_topics)


def has_topics(model: Any) -> bool:
    return isinstance(model, TopicModel)
