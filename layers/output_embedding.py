"""Word output vectors shared by the tied output layers (:class:`SememeDecoder`,
:class:`MixtureOfSoftmaxes`): a tied ``keras.layers.Embedding``'s matrix (Inan et al. 2017;
Press and Wolf 2017) or, standalone, the layer's own ``word_embeddings`` weight."""
from __future__ import annotations

import numbers

import keras
import tensorflow as tf


class OutputEmbedding:
    """Mixin for a Keras layer with word output vectors ``X`` ``[V, H2]``. A tied embedding is
    not owned by the layer and not in its config (the parent model passes it again, as
    ``TiedSoftmax`` does); the layer's own weight starts uniform in +-0.1 (the SDLM and MoS
    authors' initialisation)."""

    def _init_output_embedding(self, embedding: keras.layers.Embedding | None,
                               embedding_dim: int | None, vocab_size: int) -> None:
        """Validate and keep ``embedding`` / ``embedding_dim`` (``ValueError`` naming the
        layer class on a mismatch)."""
        owner = type(self).__name__
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

    def _output_embeddings(self) -> tf.Tensor:
        """``X`` ``[V, H2]``: the tied input embedding or the layer's own."""
        if self.embedding is not None:
            return tf.cast(self.embedding.embeddings, self.compute_dtype)
        return self.word_embeddings
