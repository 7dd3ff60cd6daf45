"""A full softmax whose output word vectors are the input embedding (weight tying: Press
and Wolf, 2017; Inan et al., 2017), the ``--decoder softmax --tie-embeddings`` output layer
of every model."""
from __future__ import annotations

import keras


def matmul_transposed(x, y):
    """``x [N, E]`` times the transposed ``y [V, E]`` -> ``[N, V]``:
    ``keras.ops.matmul(x, keras.ops.transpose(y))``, except under TensorFlow, where it is one
    ``MatMul`` with ``transpose_b``. There the gradient for ``y`` is the product
    ``dlogits^T x [V, E]`` itself, where a transposed copy makes it ``(x^T dlogits)^T``, an
    ``[E, V]`` product and a transpose that bfloat16 oneDNN takes 1.5x as long for (V =
    13,469, N = 700, E = 650 on this project's CPU); and run eagerly, the MatMul of a
    transposed copy rounds differently in the last bit for some shapes (what
    :class:`layers.lda.LDAInference` infers eagerly keeps the numbers it had). In a
    ``tf.function`` in float32 both forms give the same bits."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.matmul(x, y, transpose_b=True)
    return keras.ops.matmul(x, keras.ops.transpose(y))


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TiedSoftmax(keras.layers.Layer):
    """``log softmax(P(h) E^T + b)``: ``E`` [V, E] the word vectors, ``P`` a linear
    projection [H, E] when the hidden and embedding sizes differ (no projection otherwise),
    ``b`` [V] the output bias.

    Weight tying: pass the model's ``keras.layers.Embedding`` as ``embedding`` to use its
    ``embeddings`` as ``E`` (not owned, not in ``get_config``: the parent model passes it
    again, as :class:`~layers.mixture_of_softmaxes.MixtureOfSoftmaxes` and
    :class:`~layers.sememe_decoder.SememeDecoder` take theirs); without it, as a layer of its
    own in another model, it owns a ``word_embeddings`` [V, E] weight.

    Shapes: :meth:`call` ``hidden [..., H]`` -> log-probabilities ``[..., V]`` (normalised in
    float32 whatever the compute dtype); :meth:`target_log_prob` ``hidden [..., H]``, int
    ``targets [...]`` -> ``[...]``.

    Args:
        hidden_size: ``H``.
        embedding: the ``keras.layers.Embedding`` [V, E] to tie to, or ``None``.
        vocab_size, embedding_dim: ``V`` and ``E`` of the layer's own word vectors; required
            without ``embedding``, taken from it with it.
        **kwargs: passed to :class:`keras.layers.Layer` (``name``, ``dtype``, ...).
    """

    def __init__(self, hidden_size: int, embedding: keras.layers.Embedding | None = None,
                 vocab_size: int | None = None, embedding_dim: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if embedding is not None:
            vocab_size, embedding_dim = embedding.input_dim, embedding.output_dim
        elif vocab_size is None or embedding_dim is None:
            raise ValueError("TiedSoftmax needs an embedding to tie to, or vocab_size and "
                             "embedding_dim for word vectors of its own.")
        self.embedding = embedding
        self.hidden_size = int(hidden_size)
        self.vocab_size = int(vocab_size)
        self.embedding_dim = int(embedding_dim)
        self.projection = (keras.layers.Dense(self.embedding_dim, use_bias=False,
                                              name="tied_projection")
                           if self.hidden_size != self.embedding_dim else None)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.word_embeddings = (None if embedding is not None else self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.embedding_dim),
            initializer=keras.initializers.RandomUniform(-0.1, 0.1)))

    def build(self, input_shape):
        """Builds the projection (when loaded from a saved model); a model that calls
        :meth:`target_log_prob` before the layer itself has built it already."""
        if self.projection is not None and not self.projection.built:
            self.projection.build(tuple(input_shape[:-1]) + (self.hidden_size,))

    def logits(self, hidden):
        """[..., H] -> [..., V]. One 2-D matmul over all positions: a batched matmul of a
        [B, L, E] input with E^T would broadcast E, and its gradient would build a
        [B, V, E] copy of the embedding gradient (5x slower at B = 64, V = 4,809)."""
        ops = keras.ops
        dtype = self.compute_dtype
        x = ops.cast(hidden, dtype)
        x = self.projection(x) if self.projection is not None else x
        flat = ops.reshape(x, (-1, ops.shape(x)[-1]))
        vectors = (self.embedding.embeddings if self.embedding is not None
                   else self.word_embeddings)
        logits = (matmul_transposed(flat, ops.cast(vectors, dtype))
                  + ops.cast(self.output_bias, dtype))
        return ops.reshape(logits, (*ops.shape(x)[:-1], self.vocab_size))

    def call(self, hidden):
        """Log-probabilities, normalised in float32 whatever the compute dtype."""
        return keras.ops.log_softmax(keras.ops.cast(self.logits(hidden), "float32"), axis=-1)

    def target_log_prob(self, hidden, targets, training: bool = False):
        """log p(target) [...] in float32; ``training`` as every output layer's (no dropout
        here)."""
        return -keras.ops.sparse_categorical_crossentropy(
            targets, keras.ops.cast(self.logits(hidden), "float32"), from_logits=True)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, vocab_size=self.vocab_size,
                      embedding_dim=self.embedding_dim)
        return config
