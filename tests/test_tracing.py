"""Tests for tcnlm_tf.tracing: a step over batches is traced once, for every batch size."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tcnlm_tf.tracing import any_batch_size, batch_free_specs


def counted_step():
    """A ``tf.function`` as the trainer makes its steps, and a list of its traces."""
    traces = []

    def step(batch, state, scale):
        traces.append(tf.nest.map_structure(lambda t: t.shape, batch))
        return {"sum": tf.reduce_sum(batch["x"]) * scale, "rows": tf.shape(batch["y"])[0]}

    return tf.function(step, reduce_retracing=True, autograph=False), traces


def batch(rows, offset=0.0):
    return {"x": tf.fill([rows, 3], 1.0 + offset), "y": tf.zeros([rows], tf.int32)}


def test_full_and_short_batches_share_one_trace():
    """Full, short and full again: one trace with an unknown batch size, the same results
    as the step called directly (which traces twice)."""
    step, traces = counted_step()
    once = any_batch_size(step)
    direct, direct_traces = counted_step()
    for rows in (16, 5, 16, 1):
        got = once(batch(rows, rows), None, tf.constant(2.0))
        want = direct(batch(rows, rows), None, tf.constant(2.0))
        assert {k: v.numpy() for k, v in got.items()} == {k: v.numpy() for k, v in want.items()}
    assert len(traces) == 1 and traces[0]["x"].as_list() == [None, 3]
    assert len(direct_traces) == 2


def test_per_replica_batches_keep_their_type_with_the_batch_size_free():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    value = strategy.experimental_distribute_values_from_function(lambda _: batch(16))
    specs = batch_free_specs((value, None, tf.constant(1.0), 3))
    assert isinstance(specs[0]["x"], tf.TypeSpec) and not isinstance(specs[0]["x"],
                                                                     tf.TensorSpec)
    [x_spec] = tf.nest.flatten(specs[0]["x"], expand_composites=True)
    assert x_spec.shape.as_list() == [None, 3]
    assert specs[1] is None and specs[3] == 3 and specs[2].shape.rank == 0

    traces = []

    @tf.function(reduce_retracing=True, autograph=False)
    def step(per_replica):
        traces.append(1)
        return strategy.run(lambda b: tf.reduce_sum(b["x"]), args=(per_replica,))

    once = any_batch_size(step)
    for rows in (16, 5):
        value = strategy.experimental_distribute_values_from_function(
            lambda _, rows=rows: batch(rows))
        np.testing.assert_allclose(strategy.experimental_local_results(once(value))[0],
                                   rows * 3.0)
    assert len(traces) == 1
