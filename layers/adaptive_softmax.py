"""Adaptive softmax output layer (Grave et al., 2016) with a full-softmax option for comparison.

Reference: E. Grave, A. Joulin, M. Cissé, D. Grangier, H. Jégou, "Efficient softmax
approximation for GPUs", ICML 2017 (arXiv:1609.04309, 2016). TCNLM (Wang et al., 2018,
"Topic Compositional Neural Language Model") uses it on the language-model output.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import keras
from keras import ops

#: Upper bound on the head (shortlist) size chosen by :func:`default_cutoffs`.
DEFAULT_HEAD_SIZE = 2000
#: Vocabularies smaller than this get a plain full softmax from :func:`default_cutoffs`.
MIN_ADAPTIVE_VOCAB = 1000
#: Each further cluster boundary chosen by :func:`default_cutoffs` is this many times the previous.
CLUSTER_GROWTH = 5


def default_cutoffs(vocab_size: int) -> tuple[int, ...]:
    """Cluster boundaries for a vocabulary whose ids are sorted by decreasing frequency.

    The rule:

    * ``vocab_size < 1000``: ``()`` (a full softmax; a tail saves nothing worth its cost);
    * otherwise the head keeps ``c0 = min(2000, vocab_size // 4)`` words, and further
      boundaries ``5 * c0, 25 * c0, ...`` are added while ``vocab_size >= 2 * boundary``,
      so the last tail cluster ``[b, vocab_size)`` always holds at least ``b`` words.

    Examples: 1000 -> (250,); 8000 -> (2000,); 15000 -> (2000,); 30000 -> (2000, 10000);
    800000 -> (2000, 10000, 50000, 250000). The result is always valid for
    :class:`AdaptiveSoftmax` (strictly increasing, ``0 < c < vocab_size``); the head is never
    smaller than 250 words, so the special tokens at the lowest ids stay in it.
    """
    if vocab_size < MIN_ADAPTIVE_VOCAB:
        return ()
    cutoffs = [min(DEFAULT_HEAD_SIZE, vocab_size // 4)]
    while vocab_size >= 2 * CLUSTER_GROWTH * cutoffs[-1]:
        cutoffs.append(CLUSTER_GROWTH * cutoffs[-1])
    return tuple(cutoffs)


def _validate_cutoffs(vocab_size: int, cutoffs: Sequence[int]) -> tuple[int, ...]:
    """Returns ``cutoffs`` as a tuple of ints, or raises ``ValueError`` saying what is wrong."""
    cutoffs = tuple(cutoffs)
    for c in cutoffs:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise ValueError(f"AdaptiveSoftmax cutoffs must be integers, got {cutoffs!r}.")
    cutoffs = tuple(int(c) for c in cutoffs)
    if any(b <= a for a, b in zip(cutoffs, cutoffs[1:])):
        raise ValueError(
            f"AdaptiveSoftmax cutoffs must be strictly increasing, got {list(cutoffs)}."
        )
    if cutoffs and (cutoffs[0] <= 0 or cutoffs[-1] >= vocab_size):
        raise ValueError(
            f"AdaptiveSoftmax cutoffs must satisfy 0 < c < vocab_size={vocab_size}, got "
            f"{list(cutoffs)}; the head keeps ids [0, cutoffs[0]) and the last tail cluster "
            f"ids [cutoffs[-1], vocab_size). Use cutoffs=() for a full softmax."
        )
    return cutoffs


def _gathers_rows() -> bool:
    """Whether :meth:`AdaptiveSoftmax.target_log_prob` gathers each tail cluster's rows, a
    shape that depends on the targets (TensorFlow, PyTorch), rather than evaluating the
    cluster at every row and masking (JAX, whose ``jit`` needs static shapes)."""
    return keras.backend.backend() != "jax"


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class AdaptiveSoftmax(keras.layers.Layer):
    """Adaptive softmax over a frequency-sorted vocabulary (Grave et al., 2016, Sec. 4).

    Model. With cutoffs ``c_0 < c_1 < ... < c_{n-1}`` and ``c_n = vocab_size``, the *head*
    is one linear map ``d -> c_0 + n`` (kernel and bias): one logit per frequent word
    ``w < c_0`` and one logit per tail cluster. Tail cluster ``i`` covers the ids
    ``[c_i, c_{i+1})``; it first projects the hidden state to
    ``p_i = max(1, int(d / div_value ** (i + 1)))`` units (a kernel, no bias) and then maps
    those linearly to its ``c_{i+1} - c_i`` words (kernel and bias). Probabilities are

    * ``p(w) = softmax(head)[w]`` for ``w < c_0``;
    * ``p(w) = softmax(head)[c_0 + i] * softmax(tail_i)[w - c_i]`` for ``w`` in cluster ``i``,

    so the full distribution sums to one exactly. ``cutoffs=()`` gives a plain full softmax,
    a single linear map ``d -> vocab_size`` with bias, for comparison.

    Word ids must be sorted by decreasing training frequency (special tokens such as padding,
    ``<unk>`` and ``<eos>`` at the lowest ids, hence in the head). Padding positions are not
    treated specially: the caller masks them out of the loss.

    Shapes:

    * :meth:`call`: ``hidden [..., d]`` -> exact log-probabilities ``[..., vocab_size]``
      (this computes every tail cluster for every position; for evaluation and analysis).
    * :meth:`target_log_prob`: ``hidden [..., d]``, integer ``targets [...]`` with values in
      ``[0, vocab_size)`` -> ``log p(target)`` ``[...]`` (float). This is the efficient
      training objective: each tail cluster is evaluated only at the positions whose target
      lies in it (under JAX, whose compiled functions cannot have data-dependent shapes, at
      every position and masked; see :meth:`target_log_prob`).

    ``d`` must be known when the layer is built. The layer computes in its compute dtype;
    under a mixed-precision policy construct it with ``dtype="float32"`` as usual for an
    output softmax (``target_log_prob`` casts ``hidden`` to that dtype).

    Args:
        vocab_size: number of word ids ``V``.
        cutoffs: strictly increasing ints with ``0 < c < V``; ``()`` for a full softmax.
            :func:`default_cutoffs` picks sensible ones.
        div_value: the tail projection of cluster ``i`` has ``d / div_value ** (i + 1)`` units.
        **kwargs: passed to :class:`keras.layers.Layer` (``name``, ``dtype``, ...).
    """

    def __init__(
        self,
        vocab_size: int,
        cutoffs: Sequence[int] = (),
        div_value: float = 4.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
            raise ValueError(f"AdaptiveSoftmax vocab_size must be an int, got {vocab_size!r}.")
        if vocab_size < 2:
            raise ValueError(f"AdaptiveSoftmax vocab_size must be at least 2, got {vocab_size}.")
        if not div_value > 0:
            raise ValueError(f"AdaptiveSoftmax div_value must be positive, got {div_value!r}.")
        self.vocab_size = int(vocab_size)
        self.cutoffs = _validate_cutoffs(self.vocab_size, cutoffs)
        self.div_value = float(div_value)
        bounds = self.cutoffs + (self.vocab_size,)
        # Words the head predicts directly; the whole vocabulary for a full softmax.
        self.shortlist_size = bounds[0]
        # [(first id, one past the last id)] of each tail cluster.
        self.tail_bounds = tuple(zip(bounds[:-1], bounds[1:]))

    def build(self, input_shape):
        d = input_shape[-1]
        if d is None:
            raise ValueError(
                f"AdaptiveSoftmax needs a known last input dimension, got shape {input_shape}."
            )
        self.input_dim = int(d)
        self.head_kernel = self.add_weight(
            name="head_kernel",
            shape=(self.input_dim, self.shortlist_size + len(self.tail_bounds)),
            initializer="glorot_uniform",
        )
        self.head_bias = self.add_weight(
            name="head_bias",
            shape=(self.shortlist_size + len(self.tail_bounds),),
            initializer="zeros",
        )
        self.tail_projections, self.tail_kernels, self.tail_biases = [], [], []
        for i, (lo, hi) in enumerate(self.tail_bounds):
            proj_size = max(1, int(self.input_dim / self.div_value ** (i + 1)))
            self.tail_projections.append(
                self.add_weight(
                    name=f"tail_{i}_projection",
                    shape=(self.input_dim, proj_size),
                    initializer="glorot_uniform",
                )
            )
            self.tail_kernels.append(
                self.add_weight(
                    name=f"tail_{i}_kernel",
                    shape=(proj_size, hi - lo),
                    initializer="glorot_uniform",
                )
            )
            self.tail_biases.append(
                self.add_weight(name=f"tail_{i}_bias", shape=(hi - lo,), initializer="zeros")
            )

    def _weight(self, variable):
        """``variable`` in the compute dtype (the products run in it; Keras casts weights
        only inside ``__call__``, and ``target_log_prob`` is called directly)."""
        return ops.cast(variable, self.compute_dtype)

    def _head_logits(self, h):
        """``h [N, d]`` -> head logits ``[N, shortlist_size + n_clusters]``, float32 (the
        normalisers run in float32 whatever the compute dtype)."""
        logits = ops.matmul(h, self._weight(self.head_kernel)) + self._weight(self.head_bias)
        return ops.cast(logits, "float32")

    def _tail_logits(self, i, h):
        """``h [N, d]`` -> logits of tail cluster ``i`` over its words ``[N, size_i]``,
        float32."""
        projected = ops.matmul(h, self._weight(self.tail_projections[i]))
        logits = (ops.matmul(projected, self._weight(self.tail_kernels[i]))
                  + self._weight(self.tail_biases[i]))
        return ops.cast(logits, "float32")

    def call(self, hidden):
        """Exact log-probabilities: ``hidden [..., d]`` -> ``[..., vocab_size]`` (float32)."""
        h = ops.reshape(ops.cast(hidden, self.compute_dtype), (-1, self.input_dim))
        head_log_p = ops.log_softmax(self._head_logits(h), axis=-1)
        parts = [head_log_p[:, : self.shortlist_size]]
        for i in range(len(self.tail_bounds)):
            cluster_log_p = head_log_p[:, self.shortlist_size + i : self.shortlist_size + i + 1]
            parts.append(ops.log_softmax(self._tail_logits(i, h), axis=-1) + cluster_log_p)
        log_p = ops.concatenate(parts, axis=-1)
        return ops.reshape(log_p, (*ops.shape(hidden)[:-1], self.vocab_size))

    def target_log_prob(self, hidden, targets, training=False):
        """``log p(target)``: ``hidden [..., d]``, int ``targets [...]`` -> ``[...]``
        (``training`` is accepted as by every output layer; this one has no dropout).

        Equals ``call(hidden)`` gathered at ``targets`` but, under TensorFlow and PyTorch,
        evaluates tail cluster ``i`` only at the positions whose target lies in
        ``[c_i, c_{i+1})`` (gather those rows, then scatter-add their tail term into the head
        term). Under JAX, whose ``jit`` needs every shape when tracing, the number of those
        rows cannot be a shape: there each tail cluster is evaluated at every position and
        its term kept only where the target lies in it. The values are the same; the cost is
        every tail at every position (still below a full softmax's), 3 to 5 times the
        gathered step in a TensorFlow or PyTorch training step at 30,000 words, which is why
        those backends gather. Works with unknown leading dimensions (in ``tf.function`` and
        a ``tf.distribute`` replica context under TensorFlow); differentiable in all
        weights. Builds the layer from ``hidden.shape`` if it is not built yet.
        """
        if not self.built:
            self.build(hidden.shape)
        h = ops.reshape(ops.cast(hidden, self.compute_dtype), (-1, self.input_dim))
        t = ops.reshape(ops.cast(targets, "int32"), (-1,))
        if self.cutoffs:
            # cluster[n] = 0 for a head word, i + 1 for a word of tail cluster i.
            cutoffs = ops.convert_to_tensor(self.cutoffs, dtype="int32")
            cluster = ops.sum(ops.cast(t[:, None] >= cutoffs, "int32"), axis=1)
            head_target = ops.where(cluster == 0, t, self.shortlist_size + cluster - 1)
        else:
            head_target = t     # a full softmax: every word is in the head
        log_p = -ops.sparse_categorical_crossentropy(head_target, self._head_logits(h),
                                                     from_logits=True)
        gather = _gathers_rows()
        for i, (lo, _) in enumerate(self.tail_bounds):
            in_cluster = cluster == i + 1
            if gather:
                rows = ops.nonzero(in_cluster)[0]  # [M_i] positions whose target is in cluster i
                tail_log_p = -ops.sparse_categorical_crossentropy(
                    ops.take(t, rows, axis=0) - lo,
                    self._tail_logits(i, ops.take(h, rows, axis=0)), from_logits=True)
                log_p = ops.scatter_update(log_p, rows[:, None], tail_log_p, reduction="add")
            else:
                tail_log_p = -ops.sparse_categorical_crossentropy(
                    ops.where(in_cluster, t - lo, 0), self._tail_logits(i, h),
                    from_logits=True)
                log_p = log_p + ops.where(in_cluster, tail_log_p, 0.0)
        return ops.reshape(log_p, ops.shape(targets))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            cutoffs=list(self.cutoffs),
            div_value=self.div_value,
        )
        return config
