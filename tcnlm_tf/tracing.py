"""Steps over batches traced once for batches of any size.

An epoch's or a corpus's last batch usually has fewer rows than the others. A
``tf.function`` traces its first call for the shapes it was given and, with
``reduce_retracing``, traces again, generalised, for the first call with other shapes: the
training loop's steps (:mod:`train.trainer`) and evaluation's (:func:`corpus_nll
<tcnlm_tf.metrics.evaluation.corpus_nll>`) would be traced twice in every process, and a
trace of a model's training step costs about a second of CPU. :func:`any_batch_size` traces
a step once, at its first call, for arguments whose leading (batch) dimension is unknown;
every later call, full or short, runs that one graph. The numbers are the same bits: the
ten tiny models of the determinism test train to identical weights, test perplexities and
per-document scores with one trace as with two.

The leading dimension is the only one left open: what a step builds from the sequence
length or the vocabulary keeps its static shape, as in the full batches' trace. A stateful
run (document and stream mode) gives its first batch the model's zero state rather than
None (:func:`summed_nll <tcnlm_tf.metrics.evaluation.summed_nll>` and the trainer's epoch),
so that a step is not traced once more for the other structure of its arguments.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf


def any_batch_size(step: Callable) -> Callable:
    """``step`` (a ``tf.function``) traced at its first call for :func:`batch_free_specs`
    of that call's arguments, then called as itself."""
    traced = False

    def call(*args):
        nonlocal traced
        if not traced:
            step.get_concrete_function(*batch_free_specs(args))
            traced = True
        return step(*args)

    return call


def batch_free_specs(args: Any) -> Any:
    """``args`` (a nest of tensors, per-replica values and Python values) with every tensor
    of rank >= 1 replaced by its spec with the leading dimension unknown: a
    ``tf.TensorSpec`` for a tensor, the per-replica spec of such specs for a per-replica
    value (``tf.distribute.DistributedValues``). Scalars and Python values are kept."""
    def free(value):
        if isinstance(value, tf.distribute.DistributedValues):
            spec = tf.type_spec_from_value(value)
            return type(spec)(*map(_batch_free, tf.nest.flatten(spec, expand_composites=True)))
        if isinstance(value, tf.Tensor) and value.shape.rank:
            return _batch_free(tf.TensorSpec.from_tensor(value))
        return value

    return tf.nest.map_structure(free, args)


def _batch_free(spec: tf.TensorSpec) -> tf.TensorSpec:
    """``spec`` with its leading dimension unknown (a scalar's spec unchanged)."""
    if not spec.shape.rank:
        return spec
    return tf.TensorSpec([None, *spec.shape[1:]], spec.dtype)
