"""The topic-guided models of Wang et al. 2018: TCNLM and the naive mixture of experts.

Both condition each sentence on ``t``, the topic proportions that the neural topic model
(eq. 4-6, :class:`layers.topic_model.NeuralTopicModel`) infers from the bag of words of the
sentence's document minus that sentence (``batch["bow"]``), and both are trained end to end
on the ELBO of eq. 17 plus the diversity regulariser (eq. 18):

    J = E_q[log p(d|t)] - KL(q(t|d) || p(t)) + E_q[sum_m log p(y_m | y_<m, t)] + lambda R

The training loop minimises -J per predicted token: the language-model NLL comes from
``target_log_probs`` and ``-E_q[log p(d|t)] + KL - lambda R`` from ``aux_loss`` (one
Monte-Carlo sample of t per sentence while training, the posterior mean at evaluation).

Eq. 17 is applied per (sentence, document minus the sentence) pair, as the paper trains:
every sentence brings its own topic-model term, so on the APNEWS sample (13.8 sentences
per document) the topic model weighs about 14 times what a per-document ELBO gives it. An
example is a sequence of at most L targets, not a sentence: each example's term is weighted
by ``batch["context_weight"]`` (:mod:`tcnlm_tf.data.pipeline`), 1 / (the sequences of its
sentence), so a sentence cut into three sequences still counts its term once. With
``--ntm-weighting document`` the weight is 1 / (the sequences of its document) instead: each
document's term counts once per epoch.

``--topic-input uniform`` (an ablation) conditions the LM on the constant t = 1/T in training
and evaluation while the topic model trains as usual: the architecture without the topic
information.

* :class:`TCNLM` runs topic-compositional LSTM layers (eq. 13-15): every gate's weights are
  W_a diag(W_b t) W_c, so t mixes T experts that share structure (eq. 11-12).
* :class:`NaiveMoE` runs T separate LSTM experts and mixes their output distributions with
  t: p(y_m) = sum_k t_k softmax(V h_m^(k)) (eq. 7-8; the baseline of Table 6).
"""
from __future__ import annotations

from typing import Sequence

import keras
import tensorflow as tf

from layers.mixture_of_experts import MixtureOfExpertsLSTM, MixtureOfExpertsLSTMCell
from layers.topic_lstm import TopicCompositionalLSTM
from layers.topic_model import BagOfWords, NeuralTopicModel
from tcnlm_tf.models.base import Context, TopicModel
from tcnlm_tf.models.lstm import RecurrentLanguageModel
from tcnlm_tf.precision import FLOAT32


class TopicGuidedLanguageModel(RecurrentLanguageModel, TopicModel):
    """A :class:`RecurrentLanguageModel` whose :meth:`context` is the neural topic model:
    ``Context["topics"]`` holds t [B, T]."""

    context_inputs = ("bow", "context_weight")

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None, **extra):
        m = config.model
        return cls(topic_vocab_size=len(topic_vocab), num_topics=m.option("num_topics"),
                   ntm_hidden_units=tuple(m.option("ntm_hidden_units")),
                   diversity_weight=m.option("diversity_weight"),
                   topic_word_scale=m.option("topic_word_scale"),
                   ntm_weighting=m.option("ntm_weighting"),
                   topic_input=m.option("topic_input"), name=m.model,
                   **cls.lm_arguments(config, lm_vocab, run_dir), **extra)

    def __init__(self, vocab_size: int, topic_vocab_size: int, num_topics: int = 50,
                 ntm_hidden_units: Sequence[int] = (256, 256), diversity_weight: float = 0.1,
                 topic_word_scale: float = 30.0, ntm_weighting: str = "sentence",
                 topic_input: str = "inferred", **kwargs):
        self.num_topics = num_topics  # before super().__init__, which calls make_layer
        super().__init__(vocab_size, **kwargs)
        self.ntm_weighting = ntm_weighting
        self.topic_input = topic_input
        self.bag_of_words = BagOfWords(topic_vocab_size, name="bag_of_words", dtype=FLOAT32)
        self.ntm = NeuralTopicModel(topic_vocab_size, num_topics, hidden_units=ntm_hidden_units,
                                    diversity_weight=diversity_weight,
                                    topic_word_scale=topic_word_scale, name="ntm",
                                    dtype=FLOAT32)

    @property
    def context_options(self) -> dict[str, str]:
        """``weighting`` of ``context_weight``: ``sentence`` or ``document``."""
        return {"weighting": self.ntm_weighting}

    def _ntm(self, batch, training=False, sample=None) -> dict[str, tf.Tensor]:
        """The topic model's outputs (:meth:`NeuralTopicModel.call`) for ``batch["bow"]``."""
        return self.ntm(self.bag_of_words(batch["bow"]), training=training, sample=sample)

    def infer_topics(self, batch, training=False, sample=None) -> tf.Tensor:
        """t [B, T]: the posterior mean at evaluation, a sample with ``sample=True``."""
        return self._ntm(batch, training, sample)["topics"]

    def topic_word(self) -> tf.Tensor:
        """beta [T, topic vocabulary] (eq. 6)."""
        return self.ntm.topic_word()

    def topic_context(self, topics: tf.Tensor) -> Context:
        return Context({"topics": topics})

    def context(self, batch: dict[str, tf.Tensor], training: bool = False) -> Context:
        ntm = self._ntm(batch, training=training)
        weight = batch["context_weight"]                                  # [B]
        diversity = self.ntm.diversity()
        # -(E_q log p(d|t) - KL) summed over the batch with each example's weight, and
        # -lambda R with the same total weight (eq. 17-18). The metrics are per example,
        # unweighted.
        aux_loss = self.ntm.objective(ntm, weight, diversity)
        examples = tf.cast(tf.shape(weight)[0], tf.float32)
        metrics = {"ntm_reconstruction": tf.reduce_sum(ntm["reconstruction"]),
                   "ntm_kl": tf.reduce_sum(ntm["kl"]),
                   "ntm_diversity": diversity * examples}
        topics = ntm["topics"]
        if self.topic_input == "uniform":
            topics = tf.fill(tf.shape(topics), 1.0 / self.num_topics)
        return Context({"topics": topics}, aux_loss=aux_loss, aux_metrics=metrics)


class TCNLM(TopicGuidedLanguageModel):
    """Topic Compositional Neural Language Model (Wang et al. 2018, Figure 1): the neural
    topic model's t drives stacked :class:`TopicCompositionalLSTM` layers (eq. 13-15) with
    ``num_factors`` factors per gate, followed by the (adaptive) softmax of eq. 9."""

    def __init__(self, vocab_size: int, topic_vocab_size: int, num_factors: int = 600,
                 topic_kernel_scale: float = 10.0, **kwargs):
        # before super().__init__, which calls make_layer
        self.num_factors = num_factors
        self.topic_kernel_scale = topic_kernel_scale
        super().__init__(vocab_size, topic_vocab_size, **kwargs)

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None, **extra):
        m = config.model
        return super().create(config, lm_vocab, topic_vocab, run_dir,
                              num_factors=m.option("num_factors") or m.hidden_size,
                              topic_kernel_scale=m.option("topic_kernel_scale"))

    def make_layer(self, index: int) -> keras.layers.Layer:
        return TopicCompositionalLSTM(self.hidden_size, self.num_factors, self.num_topics,
                                      return_sequences=True, return_state=True,
                                      topic_kernel_scale=self.topic_kernel_scale,
                                      name=f"tc_lstm_{index}")

    def run_layer(self, layer, x, context, state, training):
        return layer([x, context["topics"]], initial_state=state, training=training)


class NaiveMoE(TopicGuidedLanguageModel):
    """Naive mixture of experts (eq. 7-8): ``num_topics`` LSTM experts of ``hidden_size``
    units each (one batched :class:`MixtureOfExpertsLSTMCell` per layer), one shared output
    layer V, expert distributions mixed by t. Hidden vectors are [..., T, hidden_size]."""

    @property
    def state_size(self) -> int:
        return self.num_topics * self.hidden_size

    def make_layer(self, index: int) -> keras.layers.Layer:
        # an explicit cell name keeps checkpoint keys (variable paths) the same in a process
        # that builds several models; it is the name Keras gives the first one by default
        cell = MixtureOfExpertsLSTMCell(self.hidden_size, self.num_topics,
                                        name="mixture_of_experts_lstm_cell")
        return MixtureOfExpertsLSTM(cell, return_sequences=True, return_state=True,
                                    name=f"moe_lstm_{index}")

    def encode(self, inputs, context, training=False, state=None, reset=None):
        hidden, new_state = super().encode(inputs, context, training, state, reset)
        shape = tf.concat([tf.shape(hidden)[:-1], [self.num_topics, self.hidden_size]], 0)
        return tf.reshape(hidden, shape), new_state

    def _log_topics(self, context: Context, like: tf.Tensor) -> tf.Tensor:
        """log t broadcast to ``like``'s leading dims: [B, T] -> [B, 1.., T]."""
        log_t = tf.math.log(tf.maximum(context["topics"], 1e-30))
        extra = len(like.shape) - 2
        return tf.reshape(log_t, tf.concat([tf.shape(log_t)[:1], [1] * extra,
                                            tf.shape(log_t)[1:]], 0))

    def target_log_prob(self, hidden, targets, context, training=False):
        """log sum_k t_k p_k(target) [...] from expert vectors [..., T, H] (eq. 7), whose
        leading dimension is that of ``context``'s rows ([B, L, T, H] with [B, T] topics, or
        [M, T, H] with each scored position's [M, T])."""
        per_expert = super().target_log_prob(
            hidden, tf.repeat(targets[..., None], self.num_topics, axis=-1), context, training)
        return tf.reduce_logsumexp(per_expert + self._log_topics(context, per_expert), axis=-1)

    def log_probs(self, hidden, context):
        """Full mixture log-probabilities [..., vocab_size] from [..., T, H] (eq. 7)."""
        per_expert = super().log_probs(hidden, context)            # [B, .., T, V]
        log_t = self._log_topics(context, per_expert[..., 0])[..., None]
        return tf.reduce_logsumexp(per_expert + log_t, axis=-2)
