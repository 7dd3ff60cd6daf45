"""Sememe-driven output layer (SDLM decoder) over a word-sense-sememe knowledge base.

Reference: Y. Gu, J. Yan, H. Zhu, Z. Liu, R. Xie, M. Sun, F. Lin, L. Lin, "Language Modeling
with Sparse Product of Sememe Experts", EMNLP 2018 (arXiv:1810.12387), Sec. 3.2-3.4,
eq. 4-10. The knowledge base (HowNet in the paper) is passed to the constructor as flat
integer arrays, so the layer carries it in its config and a saved ``.keras`` model reloads
without any knowledge-base file.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import keras
import numpy as np

from layers.output_embedding import OutputEmbedding

ops = keras.ops

#: The normalisation constants ``C_{k,s}`` of eq. 6: ``1/|E(s)|`` or ``1/sqrt(|E(s)||D(e_k)|)``.
NORMALIZATIONS = ("left", "symmetric")


def _int_array(values, what: str) -> np.ndarray:
    """``values`` as a 1-D int64 array, or ``ValueError`` saying what is wrong."""
    array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if array.ndim != 1:
        raise ValueError(f"SememeDecoder {what} must be a 1-D sequence of ints, got shape "
                         f"{array.shape}.")
    if array.size and not (np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"SememeDecoder {what} must hold ints, got dtype {array.dtype}.")
    return array.astype(np.int64)


# TensorFlow's sorted segment sum (an Eigen reduction) adds the rows of a segment one after
# the other only in segments of fewer rows than this; longer ones go into 4 interleaved
# partial sums.
_SEQUENTIAL_ROWS = 16


def _sorted_segment(reduce, data, segment_ids: np.ndarray, num_segments: int):
    """``reduce`` (``ops.segment_sum`` or ``ops.segment_max``) of the rows of ``data`` over
    the sorted ``segment_ids`` (a NumPy array of ids in ``[0, num_segments)``) ->
    ``[num_segments, ...]``, an empty segment 0. TensorFlow's sorted kernels
    (``tf.math.segment_sum``, ``segment_max``) take no ``num_segments`` (they return the last
    id + 1 rows: zero rows are appended); JAX's and PyTorch's need it."""
    if keras.backend.backend() != "tensorflow":
        return reduce(data, segment_ids, num_segments=num_segments, sorted=True)
    reduced = reduce(data, segment_ids, sorted=True)
    missing = num_segments - (int(segment_ids[-1]) + 1)
    if missing:
        reduced = ops.pad(reduced, [[0, missing]] + [[0, 0]] * (len(reduced.shape) - 1))
    return reduced


def _sum_in_order(data, segment_ids: np.ndarray, num_segments: int, short: bool):
    """``data [n, N]`` -> ``[num_segments, N]``: its rows summed per segment of the sorted
    ``segment_ids`` (a NumPy array ``[n]``), under TensorFlow each sum starting from 0 and
    adding the rows one after the other, in order, as ``tf.sparse.sparse_dense_matmul`` and
    the gradient of a gather (an unsorted segment sum) do: with the sorted segment sum where
    ``short`` (no segment of ``_SEQUENTIAL_ROWS`` rows or more), else with ``scatter_nd``
    (1.5 times faster on CPU than an unsorted segment sum). The other backends take their
    segment sum (PyTorch's ``scatter`` is a Python loop)."""
    if short or keras.backend.backend() != "tensorflow":
        return _sorted_segment(ops.segment_sum, data, segment_ids, num_segments)
    return ops.scatter(segment_ids[:, None], data, (num_segments, ops.shape(data)[1]))


def _gather_rows(x, rows: np.ndarray, num_rows: int, short: bool):
    """``x[rows]``, ``rows`` a sorted NumPy array into the ``num_rows`` rows of ``x [num_rows,
    N]``, whose gradient sums the rows of the output gradient per row of ``x`` with
    :func:`_sum_in_order` (``short``: no row repeated 16 times or more): under TensorFlow the
    sums of ``ops.take``'s gradient, an unsorted segment sum, in the same order, faster."""
    @ops.custom_gradient
    def gather(x):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # PyTorch: the keyword
            return _sum_in_order(upstream, rows, num_rows, short)
        return ops.take(x, rows, axis=0), grad
    return gather(x)


def _csr_product(matrix, transposed, dense):
    """TensorFlow only: ``A dense`` for a constant sparse ``A [m, k]`` and ``dense [k, n]``
    -> ``[m, n]``, with the gradient ``A^T upstream``. ``matrix`` and ``transposed`` are
    ``(indices [E, 2], values [E], dense shape)`` of ``A`` and of ``A^T``, each in row-major
    order (NumPy).

    Both products are ``tf.raw_ops.SparseMatrixMatMul`` on a CSR copy of the matrix: it sums
    each output row's entries in column order, the order in which
    ``tf.sparse.sparse_dense_matmul`` adds them, forward and (with ``adjoint_a``) backward,
    so the values and the gradient are its own bit for bit (tested at one thread and at
    two). The CSR kernel's own gradient is not used: at two threads it sums in another
    order.
    ``python -m benchmarks.probe_sparse_product`` times the two and checks the bits."""
    import tensorflow as tf

    def csr(indices, values, shape):
        return tf.raw_ops.SparseTensorToCSRSparseMatrix(indices=indices, values=values,
                                                        dense_shape=shape)

    @tf.custom_gradient
    def product(x):
        def grad(upstream):
            return tf.raw_ops.SparseMatrixMatMul(a=csr(*transposed), b=upstream)
        return tf.raw_ops.SparseMatrixMatMul(a=csr(*matrix), b=x), grad

    return product(dense)


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"SememeDecoder {what} must be a positive int, got {value!r}.")
    return int(value)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class SememeDecoder(OutputEmbedding, keras.layers.Layer):
    """Sparse product of sememe experts (Gu et al., 2018): hidden state -> P(word).

    Knowledge base. ``V`` words, ``M`` senses, ``K`` sememes, ``E`` sense-sememe edges:
    sense ``s`` belongs to word ``sense_word[s]`` (non-decreasing, every word has at least one
    sense: ``S(w)``), and edge ``e`` links sense ``edge_sense[e]`` to sememe
    ``edge_sememe[e]`` (every sense has at least one sememe: ``E(s)``; ``D(e_k)`` is the set
    of senses that contain sememe ``k``). Edges are stored sorted by (sense, sememe);
    duplicate edges are rejected.

    Model, for a context vector ``g`` in ``R^{H1}``:

    * eq. 4, sememe predictor: ``q_k = sigmoid(g^T v_k + b_k)``;
    * eq. 10, basis matrices: ``U_k = sum_r alpha_{k,r} Q_r``, ``Q_r`` in ``R^{H1 x H2}``,
      ``alpha_k = softmax(a_k)`` over the ``R`` bases (so ``alpha_{k,r} > 0``, sums to 1);
    * eq. 5-8, sense predictor: ``score(s) = sum_{k in E(s)} q_k C_{k,s} g^T U_k w_s + c_s``
      and ``log P(s|g) = log_softmax_s(score)`` over all ``M`` senses, with
      ``C_{k,s} = 1/|E(s)|`` (``normalization="left"``) or ``1/sqrt(|E(s)| |D(e_k)|)``
      (``"symmetric"``). The per-sense bias ``c_s`` (zero-initialised) is in the authors'
      code but not in the paper; ``sense_bias=False`` drops it;
    * eq. 9, word predictor: ``log P(w|g) = logsumexp_{s in S(w)} log P(s|g)``, computed as
      the log-sum-exp of w's sense scores minus that of all senses' (see _word_log_probs_t).

    Weight tying (Sec. 3.4): the output embedding ``w_s`` of every sense of word ``w`` is the
    word's input embedding ``x_w``. Pass the model's ``keras.layers.Embedding`` as
    ``embedding`` to use its ``embeddings`` ``[V, H2]`` (not owned by this layer and not in
    ``get_config``: a parent model passes it again when it is rebuilt, as ``TiedSoftmax``
    does); without it the layer owns a ``word_embeddings`` ``[V, embedding_dim]`` weight
    (uniform in +-0.1) and is usable, and serialisable, on its own.

    Initialisation: the authors' (``tied_lstm_rnn.py``): ``v_k`` and ``a_k`` uniform in
    +-0.1, ``Q_r`` in +-0.05, ``b_k`` and ``c_s`` zero. The initialisation is not part of
    the saved weights, so weights initialised any other way (e.g. Glorot-uniform ``v_k`` and
    ``Q_r``, zero ``a_k``) load all the same.

    Sparsity and cost. Nothing of size ``K x M`` or ``K x H1 x H2`` is formed. Because
    ``w_s = x_{word(s)}`` and ``U_k`` is a mixture of the bases, eq. 8's exponent reorders to
    ``score(s) = sum_r z_r[word(s)] beta_r[s] + c_s`` with ``z_r = (g^T Q_r) X^T`` (a bilinear
    score per basis and *word*) and ``beta_r[s] = sum_{k in E(s)} C_{k,s} alpha_{k,r} q_k``
    (a constant sparse ``[M, K]`` matrix with ``E`` non-zeros times ``alpha_r * q``). Per token
    that costs ``O(R H1 H2 + R H2 V + K H1 + R E + R M)`` multiply-adds, dominated by the
    ``R H2 V`` term, i.e. about ``R`` times a tied full softmax (``H2 V``), and
    ``O(R (V + M) + K)`` activation memory (``O(R (V + M + E) + K)`` off TensorFlow, where
    the sparse product gathers ``E`` rows per basis and position). ``python -m
    benchmarks.bench_decoders`` measures it beside a tied full softmax (RESULTS.md: 15-19
    times its time at the APNEWS vocabulary with WordNet, on 2 CPU cores).

    Shapes (``...`` = any leading dimensions, e.g. ``[B]`` or ``[B, L]``):

    * :meth:`call`: ``hidden [..., H1]`` -> ``log P(w|g)`` ``[..., V]`` (sums to one);
    * :meth:`target_log_prob`: ``hidden [..., H1]``, int ``targets [...]`` -> ``[...]``;
    * :meth:`sememe_probs`: ``hidden [..., H1]`` -> ``q`` ``[..., K]``;
    * :meth:`sense_log_probs`: ``hidden [..., H1]`` -> ``log P(s|g)`` ``[..., M]``;
    * :meth:`carried_sememe_probs`: ``hidden [..., H1]`` -> ``[..., K]``, the probability
      that the next word's sense carries sememe ``k``.

    It computes with ``keras.ops`` (matmul, take, segment sums), except the sparse product,
    CSR kernels under TensorFlow (:meth:`_sparse_product`), so the
    layer runs under every Keras backend (TensorFlow, JAX, PyTorch) and, under TensorFlow,
    inside ``tf.function`` and in a ``tf.distribute`` replica context. ``H1`` must be known
    when the layer is built. The layer computes in its compute dtype; under a
    mixed-precision policy construct it with ``dtype="float32"``, as usual for an output
    softmax.

    Args:
        vocab_size: ``V``.
        sense_word: ``[M]`` word id of each sense, non-decreasing.
        edge_sense: ``[E]`` sense id of each edge.
        edge_sememe: ``[E]`` sememe id of each edge.
        num_sememes: ``K`` (sememes without an edge are allowed; they predict nothing).
        num_bases: ``R``, the number of basis matrices ``Q_r`` (eq. 10).
        normalization: ``"left"`` or ``"symmetric"`` (eq. 6).
        sense_bias: add a trainable per-sense bias ``c_s`` to the sense scores.
        embedding: a ``keras.layers.Embedding`` ``[V, H2]`` to tie to, or ``None``.
        embedding_dim: ``H2`` of the layer's own word embeddings; required without
            ``embedding``, and must equal ``embedding.output_dim`` with it.
        embedding_dropout: dropout rate on the dimensions of the output embeddings ``w_s`` in
            training (see :class:`~layers.output_embedding.OutputEmbedding`; the authors'
            code: 0.3 for the medium model).
        **kwargs: passed to :class:`keras.layers.Layer` (``name``, ``dtype``, ...).
    """

    def __init__(
        self,
        vocab_size: int,
        sense_word: Sequence[int],
        edge_sense: Sequence[int],
        edge_sememe: Sequence[int],
        num_sememes: int,
        num_bases: int = 5,
        normalization: str = "left",
        sense_bias: bool = True,
        embedding: keras.layers.Embedding | None = None,
        embedding_dim: int | None = None,
        embedding_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = _positive_int(vocab_size, "vocab_size")
        self.num_sememes = _positive_int(num_sememes, "num_sememes")
        self.num_bases = _positive_int(num_bases, "num_bases")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"SememeDecoder normalization must be one of {NORMALIZATIONS}, "
                             f"got {normalization!r}.")
        self.normalization = normalization
        self.use_sense_bias = bool(sense_bias)

        words = _int_array(sense_word, "sense_word")
        senses = _int_array(edge_sense, "edge_sense")
        sememes = _int_array(edge_sememe, "edge_sememe")
        V, K = self.vocab_size, self.num_sememes
        M = len(words)
        if M == 0 or words.min() < 0 or words.max() >= V:
            raise ValueError(f"SememeDecoder sense_word must be non-empty with word ids in "
                             f"[0, vocab_size={V}).")
        if np.any(np.diff(words) < 0):
            raise ValueError("SememeDecoder sense_word must be sorted ascending (the senses of "
                             "each word contiguous).")
        senses_per_word = np.bincount(words, minlength=V)
        if np.any(senses_per_word == 0):
            missing = np.flatnonzero(senses_per_word == 0)
            raise ValueError(f"SememeDecoder: every word needs at least one sense; words "
                             f"{missing[:10].tolist()} ({len(missing)} in all) have none.")
        if len(senses) != len(sememes):
            raise ValueError(f"SememeDecoder edge_sense and edge_sememe must have the same "
                             f"length, got {len(senses)} and {len(sememes)}.")
        if len(senses) == 0 or senses.min() < 0 or senses.max() >= M:
            raise ValueError(f"SememeDecoder edge_sense must be non-empty with sense ids in "
                             f"[0, {M}) (M = len(sense_word)).")
        if sememes.min() < 0 or sememes.max() >= K:
            raise ValueError(f"SememeDecoder edge_sememe must hold sememe ids in "
                             f"[0, num_sememes={K}).")
        edges_per_sense = np.bincount(senses, minlength=M)
        if np.any(edges_per_sense == 0):
            missing = np.flatnonzero(edges_per_sense == 0)
            raise ValueError(f"SememeDecoder: every sense needs at least one sememe edge; "
                             f"senses {missing[:10].tolist()} ({len(missing)} in all) have none.")
        order = np.lexsort((sememes, senses))  # by sense, then sememe
        senses, sememes = senses[order], sememes[order]
        duplicate = (np.diff(senses) == 0) & (np.diff(sememes) == 0)
        if np.any(duplicate):
            i = int(np.flatnonzero(duplicate)[0])
            raise ValueError(f"SememeDecoder: duplicate edge (sense {senses[i]}, sememe "
                             f"{sememes[i]}).")

        self.sense_word = words
        self.edge_sense = senses
        self.edge_sememe = sememes
        self.num_senses = M
        self.num_edges = len(senses)
        self._one_sense_per_word = M == V  # then sense_word is 0..V-1 (every word has one)
        senses_per_sememe = np.bincount(sememes, minlength=K)  # |D(e_k)|
        if normalization == "left":
            coefficient = 1.0 / edges_per_sense[senses]
        else:
            coefficient = 1.0 / np.sqrt(edges_per_sense[senses] * senses_per_sememe[sememes])
        #: ``C_{k,s}`` of every edge, ``[E]``.
        self.edge_coefficient = coefficient.astype(np.float32)
        # for the gathers and segment sums: int32 indices, and whether every word's senses
        # are few enough for the sorted segment sum (_gather_rows); for TensorFlow's sparse
        # products (_csr_product), the [E, 2] (sense, sememe) indices of C with their C_{k,s},
        # and the (sememe, sense) ones of its transpose in row-major order with theirs
        self._edge_indices = np.stack([senses, sememes], 1)
        by_sememe = np.lexsort((senses, sememes))
        self._edge_indices_t = np.stack([sememes[by_sememe], senses[by_sememe]], 1)
        self._edge_coefficient_t = self.edge_coefficient[by_sememe]
        self._sense_word = words.astype(np.int32)
        self._edge_sense = senses.astype(np.int32)
        self._edge_sememe = sememes.astype(np.int32)
        self._short_words = bool(senses_per_word.max() < _SEQUENTIAL_ROWS)

        self._init_output_embedding(embedding, embedding_dim, V, embedding_dropout)

    # ------------------------------------------------------------------ weights
    def build(self, input_shape):
        h1 = input_shape[-1]
        if h1 is None:
            raise ValueError(
                f"SememeDecoder needs a known last input dimension, got shape {input_shape}."
            )
        self.input_dim = h1 = int(h1)
        h2, K, R = self.embedding_dim, self.num_sememes, self.num_bases
        # the SDLM authors' initialisation (tied_lstm_rnn.py, init_weights): v and the basis
        # logits a uniform in +-0.1, the bases Q_r in +-0.05, b and c zero
        self.sememe_kernel = self.add_weight(
            name="sememe_kernel", shape=(h1, K),
            initializer=keras.initializers.RandomUniform(-0.1, 0.1))  # v, eq. 4
        self.sememe_bias = self.add_weight(name="sememe_bias", shape=(K,),
                                           initializer="zeros")  # b, eq. 4
        self.bases = self.add_weight(
            name="bases", shape=(R, h1, h2),
            initializer=keras.initializers.RandomUniform(-0.05, 0.05))  # Q_r, eq. 10
        # a: alpha_k = softmax(a_k) over the R bases, eq. 10
        self.basis_logits = self.add_weight(
            name="basis_logits", shape=(K, R),
            initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        self.sense_bias = (self.add_weight(name="sense_bias", shape=(self.num_senses,),
                                           initializer="zeros")
                           if self.use_sense_bias else None)
        self._build_output_embedding(self.vocab_size)

    # ----------------------------------------------------------------- internals
    def _flat(self, hidden):
        """``hidden [..., H1]`` -> ``[N, H1]`` in the compute dtype (building if needed)."""
        if not self.built:
            self.build(hidden.shape)
        hidden = ops.cast(hidden, self.compute_dtype)
        return ops.reshape(hidden, (-1, self.input_dim))

    def _weight(self, variable):
        """``variable`` in the compute dtype, for the products (Keras casts weights only
        inside ``__call__``; the public methods are called directly too)."""
        return ops.cast(variable, self.compute_dtype)

    def _sememe_logits(self, g):
        """eq. 4 pre-activation ``g^T v_k + b_k``: ``g [N, H1]`` -> ``[N, K]``, float32."""
        logits = (ops.matmul(g, self._weight(self.sememe_kernel))
                  + self._weight(self.sememe_bias))
        return ops.cast(logits, "float32")

    def _sense_scores_t(self, g, training=False):
        """Sense scores (eq. 8 numerator exponent), transposed: ``g [N, H1]`` -> ``[M, N]``.

        ``score(s) = sum_r z_r[word(s)] beta_r[s] + c_s`` with ``z_r = X (g^T Q_r)^T`` (one
        bilinear score per basis and word, ``[V, N]``) and ``beta_r[s] = sum_{k in E(s)}
        C_{k,s} alpha_{k,r} q_k`` (the constant sparse ``[M, K]`` matrix of the ``C_{k,s}``
        times the dense ``alpha_{k,r} q_k``, ``[K, N]``): eq. 5-8 with eq. 10 substituted and
        the sums reordered (the sparse product: :meth:`_sparse_product`). One ``[M, N]`` term
        per basis (``R`` is small) keeps every elementwise op on contiguous ``[M, N]``
        tensors. The bilinear scores ``z_r`` are products in the compute dtype; everything
        after them (``q``, ``alpha``, ``beta``, the scores) is float32.

        Under TensorFlow, in ``tf.function``, the layer computes bit for bit what the same
        computation written with ``tf.*`` ops gives (so runs saved by a ``tf.*`` version of
        this layer resume, evaluate and export unchanged), for three reasons to keep. (1)
        The sparse product is ``tf.sparse.sparse_dense_matmul``'s to the bit
        (:func:`_csr_product`), and the gradient of the gather of ``z`` adds the same
        products in the same order as ``tf.gather``'s gradient does (:func:`_sum_in_order`).
        (2) ``X (g^T Q_r)^T``: grappler folds the transpose into the matmul, as
        ``transpose_b=True`` does. (3) Grappler's arithmetic optimizer sorts the inputs of
        every ``AddN`` by op name: the sum of the ``R`` terms (it turns the chain of ``+``
        into one ``AddN``) and the sums of the gradients that reach ``q``, ``g`` and ``X``
        from the ``R`` bases, so their order, hence their last bits, follows the names of
        the ops that make the terms. The ops named ``mul`` and ``MatMul`` (TensorFlow
        numbers names case-insensitively: ``Mul`` counts) are therefore made in the same
        number and order as the ``tf.*`` ops made them. Not kept: with fewer than 16
        positions ``N`` the gradient with respect to ``g`` may differ in the last bits (that
        of ``X (g^T Q_r)^T`` comes out transposed, and oneDNN rounds the small products
        differently), and so may gradients taken eagerly (the tape adds the ``R``
        contributions in another order).
        """
        embeddings = self._output_embeddings(training)
        q_t = ops.transpose(ops.sigmoid(self._sememe_logits(g)))  # [K, N], eq. 4
        alpha = ops.softmax(ops.cast(self.basis_logits, "float32"), axis=-1)  # [K, R], eq. 10
        scores = None
        for r in range(self.num_bases):
            z = ops.cast(ops.matmul(embeddings, ops.transpose(
                ops.matmul(g, self._weight(self.bases[r])))), "float32")  # [V, N]
            if not self._one_sense_per_word:
                z = _gather_rows(z, self._sense_word, self.vocab_size, self._short_words)
            expert = alpha[:, r:r + 1] * q_t  # alpha_{k,r} q_k, [K, N]
            beta = self._sparse_product(expert)  # [M, N]
            scores = z * beta if scores is None else scores + z * beta
        if self.sense_bias is not None:
            scores += ops.cast(self.sense_bias, "float32")[:, None]
        return scores

    def _sparse_product(self, expert):
        """``beta = C expert``: the sparse ``[M, K]`` matrix of the ``C_{k,s}`` times ``expert
        [K, N]`` -> ``[M, N]``. Under TensorFlow :func:`_csr_product`, kernels that form no
        ``[E, N]`` intermediate and give ``tf.sparse.sparse_dense_matmul``'s values and
        gradient bit for bit. On the other backends ``keras.ops`` has no sparse product: the
        rows of ``expert`` at the edges' sememes (``[E, N]``) times the edges' ``C_{k,s}``,
        summed per sense, differentiated by the backend."""
        if keras.backend.backend() == "tensorflow":
            return _csr_product(
                (self._edge_indices, self.edge_coefficient, [self.num_senses, self.num_sememes]),
                (self._edge_indices_t, self._edge_coefficient_t,
                 [self.num_sememes, self.num_senses]), expert)
        rows = (ops.take(expert, self._edge_sememe, axis=0)
                * ops.convert_to_tensor(self.edge_coefficient[:, None]))
        return ops.segment_sum(rows, self._edge_sense, num_segments=self.num_senses,
                               sorted=True)

    def _sense_log_probs_t(self, g):
        """eq. 8: ``log P(s|g)`` transposed, ``[M, N]``."""
        return ops.log_softmax(self._sense_scores_t(g), axis=0)

    def _word_log_probs_t(self, g, training=False):
        """eq. 8-9: ``log P(w|g)`` transposed, ``[V, N]``: the log-sum-exp of the scores of
        w's senses (a stable segment log-sum-exp, each word's own maximum subtracted) minus
        the log-sum-exp over all words, which equals normalising over the senses first
        (eq. 8) and summing a word's senses (eq. 9), but normalises a [V, N] tensor instead
        of log-softmaxing the [M, N] one along its first axis (3x slower on CPU)."""
        scores = self._sense_scores_t(g, training)
        peak = ops.stop_gradient(_sorted_segment(ops.segment_max, scores, self._sense_word,
                                                 self.vocab_size))  # [V, N]
        total = _sorted_segment(ops.segment_sum,
                                ops.exp(scores - ops.take(peak, self._sense_word, axis=0)),
                                self._sense_word, self.vocab_size)
        word_scores = ops.log(total) + peak
        return word_scores - ops.logsumexp(word_scores, axis=0, keepdims=True)

    def _unflatten(self, values_t, hidden, size):
        """``[size, N]`` -> ``[..., size]`` with the leading dimensions of ``hidden``."""
        return ops.reshape(ops.transpose(values_t), (*ops.shape(hidden)[:-1], size))

    # -------------------------------------------------------------------- public
    def call(self, hidden):
        """eq. 9: ``hidden [..., H1]`` -> ``log P(w|g)`` ``[..., V]``."""
        g = self._flat(hidden)
        return self._unflatten(self._word_log_probs_t(g), hidden, self.vocab_size)

    def target_log_prob(self, hidden, targets, training=False):
        """``log P(target|g)``: ``hidden [..., H1]``, int ``targets [...]`` -> ``[...]``.

        Equals :meth:`call` gathered at ``targets`` (every sense enters the normaliser, so
        there is nothing to save by evaluating only the target's senses); ``training``
        applies ``embedding_dropout``. Differentiable in all weights; builds the layer from
        ``hidden.shape`` if needed.
        """
        g = self._flat(hidden)
        targets = ops.cast(targets, "int32")
        t = ops.reshape(targets, (-1,))
        n = ops.shape(t)[0]
        log_p_t = self._word_log_probs_t(g, training)  # [V, N]
        # element [t_i, i] of the flattened [V, N] (no transposed copy of it)
        picked = ops.take(ops.reshape(log_p_t, (-1,)), t * n + ops.arange(n, dtype="int32"))
        return ops.reshape(picked, ops.shape(targets))

    def sememe_probs(self, hidden):
        """eq. 4: ``hidden [..., H1]`` -> ``q`` ``[..., K]`` (independent sigmoids)."""
        g = self._flat(hidden)
        q = ops.sigmoid(self._sememe_logits(g))
        return ops.reshape(q, (*ops.shape(hidden)[:-1], self.num_sememes))

    def sense_log_probs(self, hidden):
        """eq. 8: ``hidden [..., H1]`` -> ``log P(s|g)`` ``[..., M]``."""
        g = self._flat(hidden)
        return self._unflatten(self._sense_log_probs_t(g), hidden, self.num_senses)

    def carried_sememe_probs(self, hidden):
        """``P(e_k in E(s) | g) = sum_{s in D(e_k)} P(s|g)`` (eq. 8): ``hidden [..., H1]`` ->
        ``[..., K]``, the probability that the next word's sense carries sememe ``k``.

        Unlike ``q_k`` (eq. 4), which only scales expert ``k``'s bilinear scores and so can
        sit near 1 for an expert whose scores are negative in the context (the gate and the
        score's sign are interchangeable), this is what the model predicts about sememes.
        """
        g = self._flat(hidden)
        sense_p_t = ops.exp(self._sense_log_probs_t(g))                  # [M, N]
        carried_t = ops.segment_sum(
            ops.take(sense_p_t, self._edge_sense, axis=0), self._edge_sememe,
            num_segments=self.num_sememes, sorted=False)                 # [K, N]
        return self._unflatten(carried_t, hidden, self.num_sememes)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            sense_word=[int(x) for x in self.sense_word],
            edge_sense=[int(x) for x in self.edge_sense],
            edge_sememe=[int(x) for x in self.edge_sememe],
            num_sememes=self.num_sememes,
            num_bases=self.num_bases,
            normalization=self.normalization,
            sense_bias=self.use_sense_bias,
            embedding_dim=self.embedding_dim,
            embedding_dropout=self.embedding_dropout,
        )
        return config
