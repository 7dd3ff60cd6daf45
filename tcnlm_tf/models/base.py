"""The contract every language model in this project follows.

A model is a ``keras.Model`` whose ``call(batch, training, state)`` takes a batch dict (see
:mod:`tcnlm_tf.pipeline`) and returns a :class:`ModelOutput`: the log-probability of every
target, the state to carry to the next batch (document mode) and any auxiliary loss. The
training loop, the evaluators and the perplexity computation only ever see this contract,
so a new model (TCNLM, TDLM, ...) is a subclass that says how the topic enters the LM.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import keras
import tensorflow as tf


@dataclasses.dataclass
class ModelOutput:
    """``target_log_probs`` [B, L]: log p(target_t | history, context) (any value where
    padded: the loss masks those positions out with ``weights``); ``state``: nested tensors to carry, or None;
    ``aux_loss``: a scalar *sum over the batch's examples* of any further loss (e.g. the
    negative topic-model part of the ELBO), added to the summed NLL before the training loop
    divides by the global number of predicted tokens (0 for plain LMs); ``aux_metrics``:
    named scalar sums over examples, logged to TensorBoard divided by the example count."""

    target_log_probs: tf.Tensor
    state: Any = None
    aux_loss: tf.Tensor | float = 0.0
    aux_metrics: dict[str, tf.Tensor] = dataclasses.field(default_factory=dict)


class LanguageModel(keras.Model):
    """Base class: subclasses implement ``call`` and set the class attributes below."""

    #: the batch must contain ``bow`` (document-minus-sentence context)
    uses_bow: bool = False

    def build(self, input_shape: Any) -> None:
        """Nothing to create up front: each sub-layer builds itself on the first call.
        (Without this Keras tries a symbolic trace of ``call`` on the batch dict first.)"""
        self.built = True

    def call(self, batch: dict[str, tf.Tensor], training: bool = False,
             state: Any = None) -> ModelOutput:
        raise NotImplementedError

    def loss_terms(self, batch: dict[str, tf.Tensor], training: bool = False,
                   state: Any = None) -> dict[str, Any]:
        """Summed quantities for one (per-replica) batch: ``nll_sum`` (total NLL of the real
        targets), ``tokens`` (their count), ``examples`` (rows), ``aux_loss``,
        ``aux_metrics`` and the new ``state``."""
        out = self(batch, training=training, state=state)
        weights = batch["weights"]
        # where, not a product: a padded position may carry log p = -inf.
        nll = tf.where(weights > 0, -out.target_log_probs * weights, 0.0)
        return {
            "nll_sum": tf.reduce_sum(nll),
            "tokens": tf.reduce_sum(weights),
            "examples": tf.cast(tf.shape(weights)[0], tf.float32),
            "aux_loss": tf.convert_to_tensor(out.aux_loss, tf.float32),
            "aux_metrics": out.aux_metrics,
            "state": out.state,
        }
