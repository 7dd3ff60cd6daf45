"""Checkpointing Keras 3 models with ``tf.train.Checkpoint``.

``tf.train.Checkpoint(model=keras_model)`` follows only the attributes TensorFlow's object
graph can see; Keras 3 keeps sub-layers and weights held in Python lists (stacked LSTM
layers, an encoder's kernels, adaptive-softmax tail clusters) in its own tracker, which the
checkpoint does not follow, so such weights would silently be left out. Checkpoints here
therefore name every variable explicitly: :func:`variable_map` keys each one by its Keras
path (made unique with a suffix where two share a path), which is stable for a model built
from the same configuration.
"""
from __future__ import annotations

from typing import Iterable

import keras
import tensorflow as tf


def variable_map(variables: Iterable[keras.Variable],
                 drop_owner: bool = False) -> dict[str, keras.Variable]:
    """``{path: variable}`` for checkpointing; '/' becomes '.', repeats get '.1', '.2'...
    ``drop_owner`` drops the first path component (an optimizer's auto-numbered name such
    as ``adam_1``, which differs between two optimizers in one process)."""
    mapping: dict[str, keras.Variable] = {}
    for variable in variables:
        path = variable.path.split("/", 1)[-1] if drop_owner else variable.path
        key = path.replace("/", ".")
        candidate, n = key, 0
        while candidate in mapping:
            n += 1
            candidate = f"{key}.{n}"
        mapping[candidate] = variable
    return mapping


def model_checkpoint(model: keras.Model, **extra) -> tf.train.Checkpoint:
    """A checkpoint of every weight of ``model`` (trainable or not) plus ``extra`` objects;
    Keras optimizers among them are stored variable by variable too."""
    extra = {name: variable_map(value.variables, drop_owner=True)
             if isinstance(value, keras.optimizers.Optimizer) else value
             for name, value in extra.items()}
    return tf.train.Checkpoint(model=variable_map(model.weights), **extra)
