"""LCLM, the larger-context language model of Wang and Cho (ACL 2016), attention-based
late-fusion variant: the baseline ``lclm`` of Lau et al. 2017 ("a larger context
language model that incorporates context from preceding sentences, by treating the
preceding sentences as bags of words, and using an attentional mechanism when predicting the
next word"; the number of preceding sentences tuned to 4).

What this implementation computes, for a sentence of a document (B examples, L positions,
N = ``context_sentences``, W = ``context_words``, e = ``embedding_dim``, H = hidden size):

* context (:meth:`LCLM.context`): the N sentences just before the sentence in its document
  (fewer at the document's start), each as the bag of its topic-vocabulary words (stop words
  and rare words removed, the vocabulary of every topic model here), first W of them: the
  batch field ``preceding`` [B, N, W] (:func:`tcnlm_tf.pipeline.preceding_sentences`).
  ``s_l = (1 / |bag_l|) Σ_{w in bag_l} E_c[w]``, the mean of a context embedding E_c
  (separate from the LM's input embedding, over the topic vocabulary): ``s`` [B, N, e]. A
  sentence with no topic word, or none at all (before the document's start), is masked out.
* the LM: embedding -> dropout -> LSTM layers (Keras LSTM: memory c_t, state h_t) -> dropout,
  as the plain LSTM; the recurrence never sees the context.
* attention with the top layer's output h_t as query
  (:class:`layers.context_attention.ContextAttention`):
  ``e_{t,l} = vᵀ tanh(W_a s_l + U_a h_t + b_a)``, ``α_{t,l}`` = softmax of ``e_{t,l}`` over
  the real sentences l, ``z_t = Σ_l α_{t,l} s_l`` ([B, L, e]; z_t = 0 when the document has
  no preceding sentence).
* late fusion: ``r_t = σ(W_r z_t + U_r h_t + b_r)``, ``h'_t = h_t + r_t ⊙ tanh(W_z z_t + b_z)``
  ([B, L, H]); the output layer (the project's, adaptive softmax by default) reads h'_t.

Wang and Cho (Sec. 3.2, late fusion) fuse the gated context into the LSTM's memory cell
just before its output gate: the recurrent c_t carries the within-sentence memory alone, and
the context is added only to the copy of it that makes h_t. This implementation fuses after
the LSTM instead, into h_t, so that Keras' LSTM (and its fused kernels) is kept; as in
theirs, the context never enters c_t, which is what keeps the within-sentence memory and the
document context separate.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from layers.context_attention import ContextAttention
from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import RecurrentLanguageModel


class LCLM(RecurrentLanguageModel):
    """The larger-context LM (see the module docstring). ``Context["sentences"]`` holds the
    bags s [B, N, e] and ``Context["sentence_mask"]`` [B, N] 1 for a real sentence, 0 for an
    empty or missing one.

    Shapes: batch ``preceding`` [B, N, W] topic-vocabulary ids (0: padding) -> s [B, N, e];
    the LM's top-layer outputs [B, L, H] -> h' [B, L, H] (attention and late fusion) before
    the output layer."""

    context_inputs = ("preceding",)

    def __init__(self, vocab_size: int, topic_vocab_size: int, context_sentences: int = 4,
                 context_words: int = 50, embedding_dim: int = 300, **kwargs):
        super().__init__(vocab_size, embedding_dim=embedding_dim, **kwargs)
        self.context_sentences, self.context_words = context_sentences, context_words
        self.context_embedding = keras.layers.Embedding(topic_vocab_size, embedding_dim,
                                                        name="context_embedding")
        self.fusion = ContextAttention(self.hidden_size, name="context_attention")

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "LCLM":
        m = config.model
        return cls(topic_vocab_size=len(topic_vocab),
                   context_sentences=m.option("context_sentences"),
                   context_words=m.option("context_words"), name="lclm",
                   **cls.lm_arguments(config, lm_vocab, run_dir))

    @property
    def context_options(self) -> dict[str, int]:
        """N and W of the ``preceding`` field."""
        return {"sentences": self.context_sentences, "words": self.context_words}

    def context(self, batch, training=False) -> Context:
        """s_l, the mean context embedding of each preceding sentence's words: [B, N, e],
        and the mask of the sentences that have a word: [B, N]."""
        ids = batch["preceding"]                                          # [B, N, W]
        real = tf.cast(ids > 0, tf.float32)[..., None]                    # [B, N, W, 1]
        count = tf.reduce_sum(real, axis=2)                               # [B, N, 1]
        total = tf.reduce_sum(self.context_embedding(ids) * real, axis=2)  # [B, N, e]
        return Context({"sentences": total / tf.maximum(count, 1.0),
                        "sentence_mask": tf.cast(count[..., 0] > 0, tf.float32)})

    def encode(self, inputs, context, training=False, state=None, reset=None):
        """LSTM outputs fused with the attended context: h' [B, L, H]."""
        hidden, new_state = super().encode(inputs, context, training, state, reset)
        fused = self.fusion([hidden, context["sentences"], context["sentence_mask"]])
        return fused, new_state
