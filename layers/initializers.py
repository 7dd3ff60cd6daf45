"""Weight initialisations beside Keras's own: PyTorch's, which the SDLM authors' code uses
(Gu et al., EMNLP 2018; github.com/thunlp/SDLM-pytorch, ``LM/tied_lstm_rnn.py``).

* :func:`pytorch_lstm_initializers`: the initialisers of a ``keras.layers.LSTM`` that make
  it start as ``torch.nn.LSTM`` does, every weight and bias ``U(-k, k)`` with
  ``k = 1 / sqrt(units)``. PyTorch has two biases per layer (``b_ih + b_hh``); Keras one, so
  its bias starts as their sum (:class:`SumOfUniforms`), and there is no unit forget bias.
* :data:`PYTORCH_EMBEDDING_RANGE`: the SDLM paper's word embeddings, ``U(-0.1, 0.1)``
  (Section 4.1, "We uniformly initialize the word embeddings ... in [-0.1, 0.1]"; the
  authors' ``init_weights``). Keras's ``Embedding`` starts at ``U(-0.05, 0.05)``.
"""
from __future__ import annotations

import math

import keras

#: half-width of the SDLM authors' uniform word-embedding initialisation
PYTORCH_EMBEDDING_RANGE = 0.1


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class SumOfUniforms(keras.initializers.Initializer):
    """The sum of ``count`` independent ``U(-limit, limit)`` draws per entry (a triangular
    distribution on ``[-2 limit, 2 limit]`` for two): the starting value of a Keras bias that
    stands for PyTorch's ``b_ih + b_hh``.

    Args:
        limit: half-width of each uniform draw.
        count: how many draws are summed (positive).
        seed: seed of the draws (None: Keras's global seed generator).
    """

    def __init__(self, limit: float, count: int = 2, seed=None):
        if not (limit > 0 and math.isfinite(limit)):
            raise ValueError(f"SumOfUniforms limit must be positive and finite, got {limit!r}.")
        if count < 1:
            raise ValueError(f"SumOfUniforms count must be positive, got {count!r}.")
        self.limit = float(limit)
        self.count = int(count)
        self.seed = seed
        self._uniform = keras.initializers.RandomUniform(-self.limit, self.limit, seed=seed)

    def __call__(self, shape, dtype=None):
        """A tensor of ``shape``: the sum of :attr:`count` uniform draws per entry (drawn as
        one ``[count, *shape]`` tensor: an initialiser with a fixed seed repeats its draws
        from one call to the next)."""
        return keras.ops.sum(self._uniform((self.count, *shape), dtype=dtype), axis=0)

    def get_config(self):
        return {"limit": self.limit, "count": self.count, "seed": self.seed}


def pytorch_lstm_initializers(units: int) -> dict:
    """Keyword arguments of ``keras.layers.LSTM(units, ...)`` (or of a subclass) that start
    it as ``torch.nn.LSTM(..., units)``: kernel, recurrent kernel and each of the two biases
    ``U(-1/sqrt(units), 1/sqrt(units))``, no unit forget bias."""
    limit = 1.0 / math.sqrt(units)
    return {"kernel_initializer": keras.initializers.RandomUniform(-limit, limit),
            "recurrent_initializer": keras.initializers.RandomUniform(-limit, limit),
            "bias_initializer": SumOfUniforms(limit, count=2),
            "unit_forget_bias": False}
