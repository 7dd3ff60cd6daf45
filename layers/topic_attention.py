"""The topic model and the topic gate of TDLM (topically driven language model).

Reference: J. H. Lau, T. Baldwin, T. Cohn, "Topically Driven Neural Language Model",
ACL 2017, Sec. 3.1 (convolutional document vector, topic attention eq. 1-2), Sec. 3.2
(the GRU-like gate of eq. 3), Sec. 3.3 (dropout, placed as the authors' code places it by
default) and Sec. 6 (document labels and tags). Initialisations follow the authors' code.

* :class:`DocumentConvolution`: word ids -> document vector ``d`` (CNN + max-over-time).
* :class:`TopicAttention`: ``d`` -> attention ``p`` over topics and topic vector ``s``.
* :class:`ConvolutionalTopicModel`: the whole topic model (both layers, dropout, tags,
  the word and label heads).
* :class:`TopicGate`: mixes ``s`` into every LSTM hidden state ``h_t`` (eq. 3).
"""
from __future__ import annotations

import numbers
from typing import Sequence

import keras
from keras import ops


#: where ConvolutionalTopicModel's dropout hits besides s: the word embeddings (the authors'
#: code) or the document vector d (the paper's text)
DROPOUT_PLACEMENTS = ("embeddings", "document")


def _check_int(owner: str, name: str, value, minimum: int = 1) -> int:
    """Returns ``value`` as an int; ``ValueError`` unless it is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{owner} {name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _glorot_blocks(num_blocks: int):
    """Glorot-uniform initializer of ``[n_in, num_blocks * n]`` whose ``[n_in, n]`` column
    blocks are drawn independently, each with its own fans (as separate matrices would be)."""

    def init(shape, dtype=None):
        block = (shape[0], shape[1] // num_blocks)
        return ops.concatenate(
            [keras.initializers.GlorotUniform()(block, dtype) for _ in range(num_blocks)], axis=1
        )

    return init


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class DocumentConvolution(keras.layers.Layer):
    """Word ids -> document vector ``d`` (Sec. 3.1): embeddings, convolution, max over time.

    For each width ``h`` in ``filter_widths`` and each of its ``num_filters`` filters
    ``w_v``: ``c_i = w_v^T x_{i:i+h-1} + b_v`` (identity activation, as the paper) and
    ``d_v = max_i c_i``; ``d`` concatenates the widths in order, so ``d in R^{a}`` with
    ``a = output_size = num_filters * len(filter_widths)``.

    Padding (id 0, anywhere after the document's words; every id-0 position counts as no
    word) does not influence ``d``: padded positions get zero embeddings, the sequence is
    padded on the right by ``h - 1`` zero vectors so that every position starts a window (so
    ``M < h`` works too), and the max runs only over windows whose first word is a real word.
    A document without a word gets ``d = 0``. One convolution per width, no loop over
    positions.

    Weights: ``embeddings [vocab_size, embedding_dim]`` (uniform in ``±0.5 /
    embedding_dim``; assign pre-trained vectors to :attr:`embeddings` after :meth:`build`),
    and per width ``i``: ``conv_{i}_kernel [h, embedding_dim, num_filters]`` (truncated
    normal, stddev 0.1) and ``conv_{i}_bias [num_filters]`` (zeros).

    Shapes: int ``ids [B, M]`` -> ``d [B, output_size]``.

    Args:
        vocab_size: number of word ids (id 0 is padding).
        embedding_dim: word vector size ``e``.
        filter_widths: window widths ``h`` (positive ints).
        num_filters: filters per width.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, embedding_dim: int = 300,
                 filter_widths: Sequence[int] = (2,), num_filters: int = 20, **kwargs):
        super().__init__(**kwargs)
        owner = "DocumentConvolution"
        self.vocab_size = _check_int(owner, "vocab_size", vocab_size)
        self.embedding_dim = _check_int(owner, "embedding_dim", embedding_dim)
        self.num_filters = _check_int(owner, "num_filters", num_filters)
        if isinstance(filter_widths, numbers.Integral) or not len(filter_widths):
            raise ValueError(
                f"{owner} filter_widths must be a non-empty sequence, got {filter_widths!r}."
            )
        self.filter_widths = tuple(_check_int(owner, "filter_widths", h) for h in filter_widths)

    @property
    def output_size(self) -> int:
        """Size ``a`` of ``d``: ``num_filters * len(filter_widths)``."""
        return self.num_filters * len(self.filter_widths)

    def build(self, input_shape=None):
        scale = 0.5 / self.embedding_dim
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.embedding_dim),
            initializer=keras.initializers.RandomUniform(-scale, scale),
        )
        self.kernels, self.biases = [], []
        for i, h in enumerate(self.filter_widths):
            self.kernels.append(self.add_weight(
                name=f"conv_{i}_kernel", shape=(h, self.embedding_dim, self.num_filters),
                initializer=keras.initializers.TruncatedNormal(stddev=0.1),
            ))
            self.biases.append(self.add_weight(
                name=f"conv_{i}_bias", shape=(self.num_filters,), initializer="zeros"
            ))

    def call(self, ids):
        """``ids [B, M]`` -> ``d [B, output_size]`` (Sec. 3.1): :meth:`pool` of :meth:`embed`."""
        return self.pool(self.embed(ids), ids)

    def embed(self, ids):
        """``ids [B, M]`` -> the word embeddings ``x [B, M, e]``, zero at padding."""
        ids = ops.cast(ids, "int32")
        x = ops.take(self.embeddings, ids, axis=0)
        return x * ops.cast(ids > 0, x.dtype)[..., None]

    def pool(self, x, ids):
        """Embeddings ``x [B, M, e]`` (e.g. :meth:`embed`'s after a dropout) of ``ids [B, M]``
        -> ``d [B, output_size]``: the convolution and the max over the real windows."""
        is_word = ops.cast(ids, "int32") > 0                              # [B, M]
        x = x * ops.cast(is_word, x.dtype)[..., None]
        pooled = []
        for h, kernel, bias in zip(self.filter_widths, self.kernels, self.biases):
            windows = ops.pad(x, ((0, 0), (0, h - 1), (0, 0)))            # [B, M + h - 1, e]
            c = ops.conv(windows, kernel, padding="valid") + bias         # [B, M, F]
            # Windows starting at padding become the smallest feature of the document, which
            # cannot exceed the max over real windows: a masked max with no -inf anywhere.
            c = ops.where(is_word[..., None], c, ops.min(c, axis=1, keepdims=True))
            pooled.append(ops.max(c, axis=1))
        d = ops.concatenate(pooled, axis=-1)
        return ops.where(ops.any(is_word, axis=1, keepdims=True), d, ops.zeros_like(d))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_size)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_dim=self.embedding_dim,
                      filter_widths=list(self.filter_widths), num_filters=self.num_filters)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicAttention(keras.layers.Layer):
    """Attention of a document vector over ``k`` topics (Sec. 3.1, eq. 1-2).

    ``p = softmax(A d)`` (eq. 1) and ``s = B^T p`` (eq. 2): ``s`` is the mean of the topic
    output vectors weighted by the attention ``p``.

    Weights: ``topic_inputs`` ``A [k, a]`` and ``topic_outputs`` ``B [k, b]`` (both
    Glorot-uniform); ``a`` is the input size, taken from the input shape at build.

    Shapes: ``d [B, a]`` -> ``{"attention": p [B, k], "topic_vector": s [B, b]}``.

    Args:
        num_topics: number of topics ``k``.
        topic_dim: size ``b`` of the topic output vectors.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, num_topics: int, topic_dim: int = 50, **kwargs):
        super().__init__(**kwargs)
        self.num_topics = _check_int("TopicAttention", "num_topics", num_topics)
        self.topic_dim = _check_int("TopicAttention", "topic_dim", topic_dim)

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError(f"TopicAttention needs a known input size, got {input_shape}.")
        self.topic_inputs = self.add_weight(
            name="topic_inputs", shape=(self.num_topics, input_shape[-1]),
            initializer="glorot_uniform",
        )
        self.topic_outputs = self.add_weight(
            name="topic_outputs", shape=(self.num_topics, self.topic_dim),
            initializer="glorot_uniform",
        )

    def call(self, document_vector):
        """``d [B, a]`` -> ``{"attention": p [B, k], "topic_vector": s [B, b]}`` (eq. 1-2)."""
        attention = ops.softmax(
            ops.matmul(document_vector, ops.transpose(self.topic_inputs)), axis=-1
        )
        return {"attention": attention, "topic_vector": ops.matmul(attention, self.topic_outputs)}

    def topic_vectors(self):
        """``B [k, b]``: row ``i`` is topic ``i``'s output vector."""
        return ops.convert_to_tensor(self.topic_outputs)

    def compute_output_shape(self, input_shape):
        return {"attention": (input_shape[0], self.num_topics),
                "topic_vector": (input_shape[0], self.topic_dim)}

    def get_config(self):
        config = super().get_config()
        config.update(num_topics=self.num_topics, topic_dim=self.topic_dim)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class ConvolutionalTopicModel(keras.layers.Layer):
    """The topic model of TDLM (Sec. 3.1, 3.3) with the label and tag extensions (Sec. 6).

    ``d = DocumentConvolution(ids)`` (``a = num_filters * len(filter_widths)``); with tags
    (Sec. 6.2) ``d' = d ⊕ e``, ``e = sum_i I(i, doc) z_i`` the sum of the document's tag
    vectors ``z_i in R^f``, else ``d' = d``; then ``p = softmax(A d')``, ``s = B^T p``
    (eq. 1-2, :class:`TopicAttention`, so ``A`` is ``[k, a + f]`` with tags).

    Dropout, in training only (``dropout=0.6`` is the paper's keep probability 0.4), hits
    ``s`` and, by ``dropout_on``, either the document's word embeddings before the
    convolution (``"embeddings"``: the authors' code, ``tdlm_model.py``, which produced the
    paper's numbers) or the pooled ``d`` (``"document"``: the paper's text, Sec. 3.3, "on d
    and s"). Dropping 60 % of a 20-feature ``d`` can leave the attention nothing to tell
    documents apart by: on a toy LDA corpus it collapsed onto one topic.

    Heads: :meth:`word_logits` is the dense layer ``s -> V`` logits whose softmax predicts
    the document's words (Sec. 3.1, last paragraph); :meth:`topic_word` applies it to each
    topic vector ``B_t`` (Sec. 5); with ``num_labels > 0``, :meth:`label_logits` is the
    classifier of Sec. 6.1 on ``d' ⊕ s``.

    Weights: those of the ``convolution`` (:class:`DocumentConvolution`) and ``attention``
    (:class:`TopicAttention`) sub-layers; ``word_output`` (Dense ``[b, output_size]``,
    Glorot-uniform kernel, zero bias); with ``num_tags > 0`` ``tag_embeddings
    [num_tags + 1, tag_dim]`` (uniform ``±0.001``; row 0 is "no tag" and never used); with
    ``num_labels > 0`` ``label_output`` (Dense ``[a (+ f) + b, num_labels]``).

    Shapes: :meth:`call` int ``ids [B, M]`` (0 = padding), optional int ``tags [B, n]``
    (0 = no tag) -> dict ``"document_vector"`` ``d' [B, a (+ f)]``, ``"attention"``
    ``p [B, k]``, ``"mean_topic"`` ``s [B, b]`` and ``"topic_vector"`` ``dropout(s) [B, b]``.

    Args:
        vocab_size: number of word ids of the document input.
        output_size: number of words the topic model predicts (the word head's size).
        num_topics: number of topics ``k``.
        embedding_dim: word vector size ``e``.
        filter_widths: convolution window widths.
        num_filters: filters per width.
        topic_dim: size ``b`` of ``s``.
        dropout: drop rate in training, ``0 <= dropout < 1``.
        dropout_on: ``"embeddings"`` (the word embeddings and ``s``) or ``"document"``
            (``d`` and ``s``).
        num_tags: number of document tags (0: no tags).
        tag_dim: tag vector size ``f``.
        num_labels: number of document classes (0: no label head).
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, output_size: int, num_topics: int,
                 embedding_dim: int = 300, filter_widths: Sequence[int] = (2,),
                 num_filters: int = 20, topic_dim: int = 50, dropout: float = 0.6,
                 num_tags: int = 0, tag_dim: int = 5, num_labels: int = 0,
                 dropout_on: str = "embeddings", **kwargs):
        super().__init__(**kwargs)
        owner = "ConvolutionalTopicModel"
        if dropout_on not in DROPOUT_PLACEMENTS:
            raise ValueError(f"{owner} dropout_on must be one of {DROPOUT_PLACEMENTS}, got "
                             f"{dropout_on!r}.")
        self.dropout_on = dropout_on
        self.output_size = _check_int(owner, "output_size", output_size)
        self.num_tags = _check_int(owner, "num_tags", num_tags, minimum=0)
        self.tag_dim = _check_int(owner, "tag_dim", tag_dim)
        self.num_labels = _check_int(owner, "num_labels", num_labels, minimum=0)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) \
                or not 0.0 <= dropout < 1.0:
            raise ValueError(f"{owner} dropout must be in [0, 1), got {dropout!r}.")
        self.dropout = float(dropout)
        self.convolution = DocumentConvolution(
            vocab_size, embedding_dim, filter_widths, num_filters, dtype=self.dtype_policy,
            name="convolution",
        )
        self.attention = TopicAttention(num_topics, topic_dim, dtype=self.dtype_policy,
                                        name="attention")
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                  name="dropout")
        self.word_output = keras.layers.Dense(self.output_size, dtype=self.dtype_policy,
                                              name="word_output")
        self.label_output = keras.layers.Dense(
            self.num_labels, dtype=self.dtype_policy, name="label_output"
        ) if self.num_labels else None

    @property
    def document_size(self) -> int:
        """Size of ``d'``: ``a``, plus ``tag_dim`` with tags."""
        return self.convolution.output_size + (self.tag_dim if self.num_tags else 0)

    def build(self, ids_shape):
        self.convolution.build(ids_shape)
        self.attention.build((None, self.document_size))
        self.word_output.build((None, self.attention.topic_dim))
        if self.num_tags:
            self.tag_embeddings = self.add_weight(
                name="tag_embeddings", shape=(self.num_tags + 1, self.tag_dim),
                initializer=keras.initializers.RandomUniform(-0.001, 0.001),
            )
        if self.label_output is not None:
            self.label_output.build((None, self.document_size + self.attention.topic_dim))

    def call(self, ids, tags=None, training=False):
        """``ids [B, M]``, ``tags [B, n]`` or None -> dict of ``d'``, ``p``, ``s``, ``dropout(s)``
        (eq. 1-2 on the document vector of Sec. 3.1, tags as Sec. 6.2)."""
        words = self.convolution.embed(ids)
        if self.dropout_on == "embeddings":
            words = self.dropout_layer(words, training=training)
        document = self.convolution.pool(words, ids)
        if self.dropout_on == "document":
            document = self.dropout_layer(document, training=training)
        if self.num_tags:
            if tags is None:
                tags = ops.zeros((ops.shape(ids)[0], 1), "int32")
            tags = ops.cast(tags, "int32")
            tag_vectors = ops.take(self.tag_embeddings, tags, axis=0)        # [B, n, f]
            tag_vectors = tag_vectors * ops.cast(tags > 0, tag_vectors.dtype)[..., None]
            document = ops.concatenate([document, ops.sum(tag_vectors, axis=1)], axis=-1)
        elif tags is not None:
            raise ValueError("ConvolutionalTopicModel got tags but was built with num_tags=0.")
        outputs = self.attention(document)
        return {
            "document_vector": document,
            "attention": outputs["attention"],
            "mean_topic": outputs["topic_vector"],
            "topic_vector": self.dropout_layer(outputs["topic_vector"], training=training),
        }

    def word_logits(self, topic_vector):
        """``s [B, b]`` -> logits ``[B, output_size]`` of the words of the document."""
        return self.word_output(topic_vector)

    def topic_word(self):
        """``softmax(B W + b) [k, output_size]``: row ``t`` is topic ``t``'s word
        distribution, the word head applied to ``B_t`` instead of ``s`` (Sec. 5)."""
        return ops.softmax(self.word_logits(self.topic_vectors()), axis=-1)

    def topic_vectors(self):
        """``B [k, b]``, the topic output vectors."""
        return self.attention.topic_vectors()

    def label_logits(self, outputs):
        """Class logits ``[B, num_labels]`` from the dict :meth:`call` returned: a dense layer
        on ``d' ⊕ s`` (``"document_vector"`` and ``"mean_topic"``, Sec. 6.1)."""
        if self.label_output is None:
            raise ValueError("ConvolutionalTopicModel has no label head: num_labels=0.")
        return self.label_output(
            ops.concatenate([outputs["document_vector"], outputs["mean_topic"]], axis=-1)
        )

    def compute_output_shape(self, ids_shape):
        batch, topic_dim = ids_shape[0], self.attention.topic_dim
        return {"document_vector": (batch, self.document_size),
                "attention": (batch, self.attention.num_topics),
                "mean_topic": (batch, topic_dim), "topic_vector": (batch, topic_dim)}

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.convolution.vocab_size, output_size=self.output_size,
            num_topics=self.attention.num_topics, embedding_dim=self.convolution.embedding_dim,
            filter_widths=list(self.convolution.filter_widths),
            num_filters=self.convolution.num_filters, topic_dim=self.attention.topic_dim,
            dropout=self.dropout, num_tags=self.num_tags, tag_dim=self.tag_dim,
            num_labels=self.num_labels, dropout_on=self.dropout_on,
        )
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicGate(keras.layers.Layer):
    """GRU-like gate that mixes the topic vector ``s`` into each LSTM state ``h_t`` (eq. 3).

    ``z_t = σ(W_z s + U_z h_t + b_z)``, ``r_t = σ(W_r s + U_r h_t + b_r)``,
    ``ĥ_t = tanh(W_h s + U_h (r_t ⊙ h_t) + b_h)``, ``h'_t = (1 − z_t) ⊙ h_t + z_t ⊙ ĥ_t``.
    The ``s`` terms are computed once per sequence and broadcast over time.

    Weights (row-vector convention ``s @ W``; ``b`` = size of ``s``, ``n = units``):

    * ``topic_kernel [b, 3n]`` = ``[W_z W_r W_h]``;
    * ``hidden_gate_kernel [n, 2n]`` = ``[U_z U_r]``; ``hidden_candidate_kernel [n, n]`` = ``U_h``;
    * ``gate_bias [2n]`` = ``[b_z b_r]``, initialised to 1 (as the authors' code);
      ``candidate_bias [n]`` = ``b_h``, zeros.

    Every kernel block (``W_z``, ``U_z``, ...) is Glorot-uniform with its own fans.

    Shapes: ``[h, s]`` with ``h [B, L, n]`` (or ``[B, n]``) and ``s [B, b]`` -> ``h'`` with
    the shape of ``h``.

    Args:
        units: size ``n`` of the hidden states.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = _check_int("TopicGate", "units", units)

    def build(self, input_shape):
        hidden_shape, topic_shape = input_shape
        if hidden_shape[-1] != self.units or topic_shape[-1] is None:
            raise ValueError(f"TopicGate expects [h [..., {self.units}], s [B, b]] with a known "
                             f"b, got shapes {input_shape}.")
        n = self.units
        self.topic_kernel = self.add_weight(
            name="topic_kernel", shape=(topic_shape[-1], 3 * n), initializer=_glorot_blocks(3)
        )
        self.hidden_gate_kernel = self.add_weight(
            name="hidden_gate_kernel", shape=(n, 2 * n), initializer=_glorot_blocks(2)
        )
        self.hidden_candidate_kernel = self.add_weight(
            name="hidden_candidate_kernel", shape=(n, n), initializer="glorot_uniform"
        )
        self.gate_bias = self.add_weight(name="gate_bias", shape=(2 * n,), initializer="ones")
        self.candidate_bias = self.add_weight(
            name="candidate_bias", shape=(n,), initializer="zeros"
        )

    def call(self, inputs):
        """``[h [B, (L,) n], s [B, b]]`` -> ``h'`` shaped as ``h`` (eq. 3)."""
        hidden, topic = inputs
        n = self.units
        bias = ops.concatenate([self.gate_bias, self.candidate_bias])
        topic_terms = ops.matmul(topic, self.topic_kernel) + bias          # [B, 3n]
        for _ in range(len(hidden.shape) - 2):                            # broadcast over time
            topic_terms = ops.expand_dims(topic_terms, 1)
        gates = ops.sigmoid(topic_terms[..., :2 * n] + ops.matmul(hidden, self.hidden_gate_kernel))
        update, reset = gates[..., :n], gates[..., n:]
        candidate = ops.tanh(
            topic_terms[..., 2 * n:] + ops.matmul(reset * hidden, self.hidden_candidate_kernel)
        )
        return (1.0 - update) * hidden + update * candidate

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
