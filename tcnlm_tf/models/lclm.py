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
  batch field ``preceding`` [B, N, W] (:func:`tcnlm_tf.data.pipeline.preceding_sentences`).
  ``s_l = (1 / |bag_l|) Σ_{w in bag_l} E_c[w]``, the mean of a context embedding E_c
  (separate from the LM's input embedding, over the topic vocabulary): ``s`` [B, N, e]. A
  sentence with no topic word, or none at all (before the document's start), is masked out.
* the LM: embedding -> dropout -> LSTM layers -> dropout, as the plain LSTM; the top layer
  is where the context enters, by ``--lclm-fusion``:

  - ``late`` (default; Wang and Cho 2016, Sec. 3.2,
    :class:`layers.context_attention.LateFusionLSTM`): inside the recurrence, with the
    previous hidden state as the attention's query,
    ``e_{t,l} = vᵀ tanh(W_a s_l + U_a h_{t-1} + b_a)``, ``α_{t,l}`` = softmax of
    ``e_{t,l}`` over the real sentences l, ``z_t = Σ_l α_{t,l} s_l``; the LSTM's memory
    ``c_t = f_t ⊙ c_{t-1} + i_t ⊙ c~_t`` (gates from x_t and h_{t-1} only); the controller
    gate ``r_t = σ(W_r z_t + U_r c_t + b_r)``; ``h_t = o_t ⊙ (tanh(c_t) + r_t ⊙ tanh(W_z z_t
    + b_z))``. h_t feeds the output layer and the next step's gates (the recurrence sees
    the context); the memory cell carried to the next step, c_t, stays free of it.
  - ``output`` (this project's earlier variant, kept for its runs;
    :class:`layers.context_attention.ContextAttention`): the plain LSTM runs first and the
    context is added to each finished output, with h_t as query:
    ``e_{t,l} = vᵀ tanh(W_a s_l + U_a h_t + b_a)``, ``r_t = σ(W_r z_t + U_r h_t + b_r)``,
    ``h'_t = h_t + r_t ⊙ tanh(W_z z_t + b_z)``; the context reaches only the output layer
    (adaptive softmax by default), never the recurrence.

Where this differs from Wang and Cho: their context vectors are bags of words over the whole
vocabulary, read by a bidirectional RNN over the preceding sentences before the attention;
here each sentence is the mean embedding of its topic-vocabulary words (stop words and rare
words removed, as Lau et al.'s baseline and every topic model here) and no RNN runs over the
bags, the attention reads them directly. With several LSTM layers only the top one is fused.
Their paper's text was not at hand when this was written: the equations above follow its
Sec. 3.2 as read from secondary sources (a controller gate on the context and the memory
cell, fused just before the output gate); no equation numbers are cited for that reason.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from layers.context_attention import ContextAttention, LateFusionLSTM
from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import RecurrentLanguageModel
from tcnlm_tf.models.registry import LCLM_FUSIONS as FUSIONS


class LCLM(RecurrentLanguageModel):
    """The larger-context LM (see the module docstring). ``Context["sentences"]`` holds the
    bags s [B, N, e] and ``Context["sentence_mask"]`` [B, N] 1 for a real sentence, 0 for an
    empty or missing one.

    Shapes: batch ``preceding`` [B, N, W] topic-vocabulary ids (0: padding) -> s [B, N, e];
    ``fusion="late"``: the top LSTM layer reads s at every step and returns h [B, L, H];
    ``fusion="output"``: its outputs [B, L, H] -> h' [B, L, H] (attention and fusion) before
    the output layer."""

    context_inputs = ("preceding",)

    def __init__(self, vocab_size: int, topic_vocab_size: int, context_sentences: int = 4,
                 context_words: int = 50, embedding_dim: int = 300, fusion: str = "late",
                 **kwargs):
        if fusion not in FUSIONS:
            raise ValueError(f"LCLM fusion must be one of {FUSIONS}, got {fusion!r}")
        self.fusion_mode = fusion            # before super().__init__, which calls make_layer
        super().__init__(vocab_size, embedding_dim=embedding_dim, **kwargs)
        self.context_sentences, self.context_words = context_sentences, context_words
        self.context_embedding = keras.layers.Embedding(topic_vocab_size, embedding_dim,
                                                        name="context_embedding")
        if fusion == "output":
            self.fusion = ContextAttention(self.hidden_size, name="context_attention")

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "LCLM":
        m = config.model
        return cls(topic_vocab_size=len(topic_vocab),
                   context_sentences=m.option("context_sentences"),
                   context_words=m.option("context_words"), fusion=m.option("lclm_fusion"),
                   name="lclm", **cls.lm_arguments(config, lm_vocab, run_dir))

    def embedding_tables(self):
        """The LM's input embedding and the context embedding E_c (topic vocabulary)."""
        return super().embedding_tables() + [(self.context_embedding.embeddings, "topic")]

    def _fused(self, index: int) -> bool:
        """Whether LSTM layer ``index`` is the late-fusion one (the top layer)."""
        return self.fusion_mode == "late" and index == self.num_layers - 1

    def make_layer(self, index: int) -> keras.layers.Layer:
        if self._fused(index):
            return LateFusionLSTM(self.hidden_size, return_sequences=True, return_state=True,
                                  name=f"late_fusion_lstm_{index}")
        return super().make_layer(index)

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
        embedded = tf.cast(self.context_embedding(ids), tf.float32)       # [B, N, W, e]
        total = tf.reduce_sum(embedded * real, axis=2)                    # [B, N, e]
        return Context({"sentences": total / tf.maximum(count, 1.0),
                        "sentence_mask": tf.cast(count[..., 0] > 0, tf.float32)})

    def run_layer(self, layer, x, context, state, training):
        if isinstance(layer, LateFusionLSTM):
            return layer([x, context["sentences"], context["sentence_mask"]],
                         initial_state=state, training=training)
        return super().run_layer(layer, x, context, state, training)

    def encode(self, inputs, context, training=False, state=None, reset=None):
        """The top layer's outputs [B, L, H], fused with the attended context inside the
        recurrence (``late``) or after it (``output``)."""
        hidden, new_state = super().encode(inputs, context, training, state, reset)
        if self.fusion_mode == "output":
            hidden = self.fusion([hidden, context["sentences"], context["sentence_mask"]])
        return hidden, new_state
