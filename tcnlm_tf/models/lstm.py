"""The basic-LSTM language model: the papers' baseline (Wang et al. 2018 Table 2 "basic-LSTM").

Embedding (``embedding_dim``) -> dropout -> ``num_layers`` x LSTM(``hidden_size``), each
followed by dropout (rate 0.4 in the papers) -> output distribution over the vocabulary:
adaptive softmax (Grave et al. 2016) by default, a full softmax, or a full softmax whose
weights are the input embedding (tied; with a linear projection when hidden and embedding
sizes differ).

In ``sentence`` mode every sequence starts from a zero state; in ``document`` mode the
training loop passes the previous batch's final state back in, and ``batch["reset"]`` zeroes
it for lanes that start a new document.
"""
from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf

from layers.adaptive_softmax import AdaptiveSoftmax
from tcnlm_tf.models.base import LanguageModel, ModelOutput


class LSTMLanguageModel(LanguageModel):
    """Shapes: ``batch["inputs"]``/``["targets"]`` int [B, L] -> ``ModelOutput.target_log_probs``
    [B, L]; ``state`` is a list of ``[h, c]`` pairs, each [B, hidden_size], one per layer."""

    def __init__(self, vocab_size: int, embedding_dim: int = 300, hidden_size: int = 600,
                 num_layers: int = 1, dropout: float = 0.4, cutoffs: Sequence[int] = (),
                 tie_embeddings: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.tie_embeddings = tie_embeddings
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim, name="embedding")
        self.input_dropout = keras.layers.Dropout(dropout)
        self.lstms = [keras.layers.LSTM(hidden_size, return_sequences=True, return_state=True,
                                        name=f"lstm_{i}") for i in range(num_layers)]
        self.dropouts = [keras.layers.Dropout(dropout) for _ in range(num_layers)]
        if tie_embeddings:
            self.tied_projection = (keras.layers.Dense(embedding_dim, use_bias=False,
                                                       name="tied_projection")
                                    if hidden_size != embedding_dim else None)
            self.output_bias = self.add_weight(name="output_bias", shape=(vocab_size,),
                                               initializer="zeros")
        else:
            self.softmax = AdaptiveSoftmax(vocab_size, cutoffs, name="softmax")

    def zero_state(self, batch_size: tf.Tensor) -> list[list[tf.Tensor]]:
        zeros = tf.zeros([batch_size, self.hidden_size])
        return [[zeros, zeros] for _ in range(self.num_layers)]

    def encode(self, inputs: tf.Tensor, training: bool = False, state: Any = None,
               reset: tf.Tensor | None = None) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """LSTM outputs [B, L, hidden_size] and the final state; ``reset`` [B] zeroes ``state``."""
        if state is None:
            state = self.zero_state(tf.shape(inputs)[0])
        elif reset is not None:
            keep = (1.0 - reset)[:, None]
            state = [[h * keep, c * keep] for h, c in state]
        x = self.input_dropout(self.embedding(inputs), training=training)
        new_state = []
        for lstm, dropout, layer_state in zip(self.lstms, self.dropouts, state):
            x, h, c = lstm(x, initial_state=layer_state, training=training)
            x = dropout(x, training=training)
            new_state.append([h, c])
        return x, new_state

    def log_probs(self, hidden: tf.Tensor) -> tf.Tensor:
        """Full next-word log-probabilities: hidden [..., H] -> [..., vocab_size] (sum to 1)."""
        if self.tie_embeddings:
            return tf.nn.log_softmax(self._tied_logits(hidden), axis=-1)
        return self.softmax(hidden)

    def target_log_prob(self, hidden: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """log p(target) [...] from hidden [..., H] (efficient for the adaptive softmax)."""
        if self.tie_embeddings:
            return -tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=targets, logits=self._tied_logits(hidden))
        return self.softmax.target_log_prob(hidden, targets)

    def _tied_logits(self, hidden: tf.Tensor) -> tf.Tensor:
        x = self.tied_projection(hidden) if self.tied_projection is not None else hidden
        return tf.matmul(x, self.embedding.embeddings, transpose_b=True) + self.output_bias

    def call(self, batch: dict[str, tf.Tensor], training: bool = False,
             state: Any = None) -> ModelOutput:
        hidden, new_state = self.encode(batch["inputs"], training=training, state=state,
                                        reset=batch.get("reset"))
        return ModelOutput(self.target_log_prob(hidden, batch["targets"]), state=new_state)
