"""Recurrent language models: the shared skeleton and the basic-LSTM baseline.

:class:`RecurrentLanguageModel` is embedding (``embedding_dim``) -> dropout ->
``num_layers`` recurrent layers, each followed by dropout (rate 0.4 in the papers; the last,
on the vector g the output layer reads, may have its own rate, ``output_dropout``) -> an
output distribution over the vocabulary (:meth:`~RecurrentLanguageModel.make_output_layer`,
one of the decoders of :mod:`tcnlm_tf.decoders.output_layers`): adaptive softmax (Grave et
al. 2016) by default, a full softmax, a full softmax whose weights are the input embedding
(:class:`layers.TiedSoftmax`), the sememe-driven decoder or a mixture of softmaxes.
Subclasses change only how the document context enters (:meth:`~RecurrentLanguageModel.context`,
:meth:`~RecurrentLanguageModel.make_layer`, :meth:`~RecurrentLanguageModel.run_layer`), the
output layer, and, for output mixtures, the output methods.

:class:`LSTMLanguageModel` is the papers' basic-LSTM baseline (Wang et al. 2018 Table 2).
In ``sentence`` mode every sequence starts from a zero state; in ``document`` mode the
training loop passes the previous batch's final state back in, and ``batch["reset"]``
zeroes it for lanes that start a new document.
"""
from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from layers.hoisted_lstm import HoistedLSTM
from layers.initializers import PYTORCH_EMBEDDING_RANGE, pytorch_lstm_initializers
from tcnlm_tf.decoders import output_layers
from tcnlm_tf.models.base import Context, LanguageModel, ModelOutput


class RecurrentLanguageModel(LanguageModel):
    """Shapes: ``batch["inputs"]``/``["targets"]`` int [B, L] -> ``ModelOutput.target_log_probs``
    [B, L]; ``state`` is a list of ``[h, c]`` pairs, one per layer.

    ``decoder`` names the output layer and ``decoder_options`` its settings (see
    :func:`tcnlm_tf.decoders.output_layers.make_output_layer`): ``{"cutoffs": (2000,)}`` for
    ``adaptive`` (``()``: a full softmax), ``{"tie": True}`` for a tied ``softmax``,
    ``{"mixtures": 10}`` for ``mos``, ``{"knowledge_base": KnowledgeBase, "num_bases": 5,
    "normalization": "left"}`` for ``sdlm``. ``output_dropout``: the rate of the dropout after
    the last recurrent layer (None: ``dropout``; the SDLM authors use 0.2 + 0.5 * dropout
    there).
    ``init``: ``"keras"`` (Keras's initialisers) or ``"pytorch"`` (the SDLM authors': the
    embedding ``U(-0.1, 0.1)`` and every layer :meth:`make_layer` makes here as
    ``torch.nn.LSTM`` starts, :mod:`layers.initializers`; a subclass's own layers keep their
    initialisers).
    ``gather_targets``: run the output layer at the real targets only
    (:meth:`scored_log_probs`); a run sets it in sentence mode, where each sentence is
    padded to the sequence length (about 37 % of an APNEWS batch's positions, and the output
    layer is most of a step's work), and not in document and stream modes, which pad only
    at the ends of documents (about 4 %, too little to pay for the gathering;
    docs/benchmarks.md)."""

    def __init__(self, vocab_size: int, embedding_dim: int = 300, hidden_size: int = 600,
                 num_layers: int = 1, dropout: float = 0.4, decoder: str = "adaptive",
                 decoder_options: dict[str, Any] | None = None,
                 embeddings_file: str | None = None, output_dropout: float | None = None,
                 init: str = "keras", gather_targets: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.gather_targets = gather_targets
        self.embeddings_file = embeddings_file
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.init = init
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="embedding",
            embeddings_initializer=("uniform" if init == "keras" else keras.initializers.
                                    RandomUniform(-PYTORCH_EMBEDDING_RANGE,
                                                  PYTORCH_EMBEDDING_RANGE)))
        self.input_dropout = keras.layers.Dropout(dropout)
        self.rnns = [self.make_layer(i) for i in range(num_layers)]
        last = dropout if output_dropout is None else output_dropout
        self.dropouts = [keras.layers.Dropout(dropout if i < num_layers - 1 else last)
                         for i in range(num_layers)]
        self.softmax = self.make_output_layer(decoder, dict(decoder_options or {}))

    @classmethod
    def lm_arguments(cls, config, lm_vocab, run_dir=None) -> dict[str, Any]:
        """The constructor arguments of the recurrent skeleton from a run's configuration
        (``run_dir`` holds what the decoder needs, e.g. the SDLM's knowledge base)."""
        m = config.model
        return dict(vocab_size=len(lm_vocab), embedding_dim=m.embedding_dim,
                    hidden_size=m.hidden_size, num_layers=m.num_layers, dropout=m.dropout,
                    output_dropout=m.output_dropout, embeddings_file=m.option("embeddings"),
                    init=m.init, gather_targets=m.mode == "sentence",
                    **output_layers.output_arguments(config, lm_vocab, run_dir))

    def embedding_tables(self) -> list[tuple[Any, str]]:
        """The model's word-embedding tables that ``--embeddings`` initialises, as
        ``(variable [words, e], vocabulary)`` with vocabulary ``"lm"`` or ``"topic"`` (row
        i is word i of the run's LM or topic vocabulary): the LM's input embedding here
        (shared with the output layer when it is tied); subclasses add their own."""
        return [(self.embedding.embeddings, "lm")]

    def prepare(self, corpus, run_dir, log) -> None:
        """With ``--embeddings FILE``: every table of :meth:`embedding_tables` from the file's
        vectors (one pass over it); words it lacks keep a random initialisation, counted in
        the log. Subclasses with one-off work of their own call this first."""
        if not self.embeddings_file:
            return
        from tcnlm_tf.data.embeddings import read_vectors

        vocabularies = {"lm": list(corpus.lm_vocab.words),
                        "topic": list(corpus.topic_vocab.words)}
        tables = self.embedding_tables()
        needed = list(dict.fromkeys(w for _, name in tables for w in vocabularies[name]))
        vectors, found = read_vectors(self.embeddings_file, needed, self.embedding.output_dim)
        row = {word: i for i, word in enumerate(needed)}
        for variable, name in tables:
            rows = [row[w] for w in vocabularies[name]]
            variable.assign(vectors[rows])
            hits = int(found[rows].sum())
            log(f"embeddings: {hits} of {len(rows)} {name.upper()} words found in "
                f"{self.embeddings_file} for {variable.path}; the other {len(rows) - hits} "
                f"keep a random initialisation")

    # ---------------------------------------------------------- subclass hooks
    def make_output_layer(self, decoder: str, options: dict[str, Any]) -> keras.layers.Layer:
        """The output distribution: a layer mapping hidden [..., output_size] to
        log-probabilities [..., V], with ``target_log_prob(hidden, targets)``."""
        return output_layers.make_output_layer(decoder, options, self.vocab_size, self.output_size,
                                          self.embedding)

    @property
    def state_size(self) -> int:
        """Size of each of h and c of every layer."""
        return self.hidden_size

    @property
    def output_size(self) -> int:
        """Size of the vectors the output layer reads."""
        return self.hidden_size

    def make_layer(self, index: int) -> keras.layers.Layer:
        """Recurrent layer ``index``; must return (sequence, h, c) when run. The LSTM is
        :class:`layers.hoisted_lstm.HoistedLSTM`, ``keras.layers.LSTM`` with ``x W + b``
        computed before the loop (same weights and names, so checkpoints written with
        ``keras.layers.LSTM`` load)."""
        initializers = (pytorch_lstm_initializers(self.hidden_size) if self.init == "pytorch"
                        else {})
        return HoistedLSTM(self.hidden_size, return_sequences=True, return_state=True,
                           name=f"lstm_{index}", **initializers)

    def context(self, batch: dict[str, tf.Tensor], training: bool = False) -> Context:
        """What the document context contributes; nothing for the plain LSTM."""
        return Context()

    def run_layer(self, layer: keras.layers.Layer, x: tf.Tensor, context: Context,
                  state: list[tf.Tensor], training: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return layer(x, initial_state=state, training=training)

    # ---------------------------------------------------------------- the LM
    def zero_state(self, batch_size: tf.Tensor) -> list[list[tf.Tensor]]:
        zeros = tf.zeros([batch_size, self.state_size])
        return [[zeros, zeros] for _ in range(self.num_layers)]

    def encode(self, inputs: tf.Tensor, context: Context, training: bool = False,
               state: Any = None, reset: tf.Tensor | None = None
               ) -> tuple[tf.Tensor, list[list[tf.Tensor]]]:
        """Recurrent outputs [B, L, output_size] and the final state; ``reset`` [B] zeroes
        ``state`` for the lanes that start a new document."""
        if state is None:
            state = self.zero_state(tf.shape(inputs)[0])
        elif reset is not None:
            keep = (1.0 - reset)[:, None]
            state = [[h * keep, c * keep] for h, c in state]
        x = self.input_dropout(self.embedding(inputs), training=training)
        new_state = []
        for layer, dropout, layer_state in zip(self.rnns, self.dropouts, state):
            x, h, c = self.run_layer(layer, x, context, layer_state, training)
            x = dropout(x, training=training)
            new_state.append([tf.cast(h, tf.float32), tf.cast(c, tf.float32)])
        return x, new_state

    def log_probs(self, hidden: tf.Tensor, context: Context) -> tf.Tensor:
        """Full next-word log-probabilities: hidden [..., H] -> [..., vocab_size] (sum to 1)."""
        return self.softmax(hidden)

    def target_log_prob(self, hidden: tf.Tensor, targets: tf.Tensor, context: Context,
                        training: bool = False) -> tf.Tensor:
        """log p(target) [...] from hidden [..., H] (efficient for the adaptive softmax);
        ``training`` turns on the output layer's own dropout (SDLM, MoS)."""
        return self.softmax.target_log_prob(hidden, targets, training=training)

    def call(self, batch: dict[str, tf.Tensor], training: bool = False,
             state: Any = None, context: Context | None = None) -> ModelOutput:
        if context is None:
            context = self.context(batch, training=training)
        hidden, new_state = self.encode(batch["inputs"], context, training=training,
                                        state=state, reset=batch.get("reset"))
        return ModelOutput(self.scored_log_probs(hidden, batch, context, training),
                           state=new_state, aux_loss=context.aux_loss,
                           aux_metrics=context.aux_metrics)

    def scored_log_probs(self, hidden: tf.Tensor, batch: dict[str, tf.Tensor],
                         context: Context, training: bool = False) -> tf.Tensor:
        """log p(target) [B, L] from hidden [B, L, ...]. With ``gather_targets`` and
        ``batch["weights"]``, the output layer runs only at the M real targets (weight > 0),
        gathered to ``hidden [M, ...]``, ``targets [M]`` and their examples' context rows
        (:meth:`Context.rows`), and their log probabilities are scattered back (0 at the
        padding, which the loss masks out); otherwise at every position
        (:meth:`target_log_prob`). The values at the real targets are the same either way;
        gathered, the gradients sum over fewer rows, so they round differently in the last
        bits, and an output layer's own dropout (SDLM, MoS) draws its masks for
        ``[M, ...]``."""
        weights = batch.get("weights")
        if weights is None or not self.gather_targets:
            return self.target_log_prob(hidden, batch["targets"], context, training)
        positions = tf.where(weights > 0)                                 # [M, 2]
        picked = self.target_log_prob(tf.gather_nd(hidden, positions),
                                      tf.gather_nd(batch["targets"], positions),
                                      context.rows(positions[:, 0]), training)   # [M]
        return tf.scatter_nd(positions, tf.cast(picked, tf.float32),
                             tf.shape(weights, out_type=tf.int64))


class LSTMLanguageModel(RecurrentLanguageModel):
    """The basic-LSTM baseline: :class:`RecurrentLanguageModel` with Keras LSTM layers and no
    document context."""

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "LSTMLanguageModel":
        return cls(**cls.lm_arguments(config, lm_vocab, run_dir), name="lstm_lm")
