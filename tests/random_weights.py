"""Random weights for the layer tests: every weight drawn from ``N(0, scale^2)``, so that
initial zeros and ones (biases, forget-gate ones) are tested too, and two layers given the
same ones."""
from __future__ import annotations

import numpy as np


def randomise(layer, seed=0, scale=0.5):
    """Replaces every weight of the built ``layer`` with ``N(0, scale^2)`` draws (float32,
    ``numpy.random.default_rng(seed)`` in ``layer.weights`` order); returns ``layer``."""
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(scale=scale, size=w.shape).astype(np.float32))
    return layer


def same_random_weights(reference, other):
    """``reference`` randomised (:func:`randomise`, seed 0, scale 0.5) and ``other`` given
    the same weights (``set_weights``: the same order and shapes); both must be built.
    Returns ``(reference, other)``."""
    other.set_weights(randomise(reference).get_weights())
    return reference, other
