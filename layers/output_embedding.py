"""Word output vectors shared by the tied output layers (:class:`SememeDecoder`,
:class:`MixtureOfSoftmaxes`): a tied ``keras.layers.Embedding``'s matrix (Inan et al. 2017;
Press and Wolf 2017) or, standalone, the layer's own ``word_embeddings`` weight, with the
SDLM authors' dropout on its dimensions in training."""
from __future__ import annotations

import numbers

import keras
from keras import ops


class OutputEmbedding:
    """Mixin for a Keras layer with word output vectors ``X`` ``[V, H2]``. A tied embedding is
    not owned by the layer and not in its config (the parent model passes it again, as
    ``TiedSoftmax`` does); the layer's own weight starts uniform in +-0.1 (the SDLM and MoS
    authors' initialisation).

    ``embedding_dropout`` drops whole dimensions of ``X`` in training: one mask ``[H2]`` per
    call, shared by every word and position, scaled by ``1 / (1 - rate)``, applied on the
    output side only (the input embedding is read undropped). This is the SDLM authors'
    output-embedding dropout (their ``tied_lstm_rnn.py``: a dropped mask of ones times the
    encoder weight, rate ``0.5 * dropout``, 0.3 for the medium model; Gu et al. 2018
    Appendix C.1 tune the last two layers' dropout separately)."""

    def _init_output_embedding(self, embedding: keras.layers.Embedding | None,
                               embedding_dim: int | None, vocab_size: int,
                               embedding_dropout: float = 0.0) -> None:
        """Validate and keep ``embedding`` / ``embedding_dim`` / ``embedding_dropout``
        (``ValueError`` naming the layer class on a mismatch)."""
        owner = type(self).__name__
        if not 0.0 <= embedding_dropout < 1.0:
            raise ValueError(f"{owner} embedding_dropout must be in [0, 1), "
                             f"got {embedding_dropout!r}.")
        self.embedding_dropout = float(embedding_dropout)
        # created only when used, so a layer without it has the variables it always had
        self.embedding_mask = (keras.layers.Dropout(self.embedding_dropout,
                                                    name="embedding_dropout")
                               if self.embedding_dropout > 0 else None)
        if embedding is not None:
            if not isinstance(embedding, keras.layers.Embedding):
                raise ValueError(f"{owner} embedding must be a keras.layers.Embedding, "
                                 f"got {type(embedding).__name__}.")
            if embedding.input_dim != vocab_size:
                raise ValueError(f"{owner} embedding has {embedding.input_dim} rows, "
                                 f"vocab_size is {vocab_size}.")
            if embedding_dim is not None and embedding_dim != embedding.output_dim:
                raise ValueError(f"{owner} embedding_dim={embedding_dim} differs from the "
                                 f"tied embedding's output_dim={embedding.output_dim}.")
            embedding_dim = embedding.output_dim
        elif embedding_dim is None:
            raise ValueError(f"{owner} needs embedding_dim when no embedding is given.")
        if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, numbers.Integral) \
                or embedding_dim < 1:
            raise ValueError(f"{owner} embedding_dim must be a positive int, "
                             f"got {embedding_dim!r}.")
        self.embedding = embedding
        self.embedding_dim = int(embedding_dim)

    def _build_output_embedding(self, vocab_size: int) -> None:
        """In ``build``: the own ``word_embeddings`` weight, or build the tied embedding."""
        if self.embedding is None:
            self.word_embeddings = self.add_weight(
                name="word_embeddings", shape=(vocab_size, self.embedding_dim),
                initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        else:
            self.word_embeddings = None
            if not self.embedding.built:
                self.embedding.build((None,))

    def _output_embeddings(self, training=False):
        """``X`` ``[V, H2]`` in the compute dtype: the tied input embedding or the layer's own
        (in training, its dimensions dropped with ``embedding_dropout``)."""
        owned = self.embedding.embeddings if self.embedding is not None else self.word_embeddings
        vectors = ops.cast(owned, self.compute_dtype)
        if self.embedding_mask is not None and training:
            vectors = vectors * self.embedding_mask(
                ops.ones((1, self.embedding_dim), vectors.dtype), training=True)
        return vectors
