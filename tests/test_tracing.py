"""Tests for tcnlm_tf.tracing: a step over batches is traced once, for every batch size; a
stateful run's steps too, from the first batch on."""
from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf

from tcnlm_tf.metrics.evaluation import summed_nll
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


def test_a_stateful_run_traces_its_training_and_evaluation_steps_once(tmp_path, monkeypatch):
    """Document mode: the first batch of an epoch and of an evaluation starts from the
    model's zero state (not None), so the full, short and first batches share one trace."""
    from tests.conftest import TINY_EPOCH, TINY_MODELS, run_flags
    from train import trainer
    from train.run import main

    traces = collections.Counter()

    def counted(name):
        step = getattr(trainer.Trainer, name)

        def count(self, batch, *args):
            traces[name] += 1           # once per trace: the tf.function calls it to trace
            return step(self, batch, *args)

        return count

    for name in ("_distributed_train_step", "_distributed_eval_step"):
        monkeypatch.setattr(trainer.Trainer, name, counted(name))
    main(TINY_EPOCH + TINY_MODELS["lstm-document"] + run_flags(tmp_path, "document"))
    assert traces == {"_distributed_train_step": 1, "_distributed_eval_step": 1}


def test_the_evaluation_loop_starts_a_carried_state_from_the_first_state():
    """summed_nll: with ``first_state`` the first batch gets its zero state and each later
    one the state the previous step returned; without, every batch gets None."""
    seen = []

    def step(batch, state):
        seen.append(state)
        return {"nll_sum": tf.constant(1.0), "tokens": tf.constant(2.0)}, f"after {batch}"

    assert summed_nll(step, [1, 2, 3], lambda batch: f"zeros for {batch}") == (3.0, 6.0)
    assert seen == ["zeros for 1", "after 1", "after 2"]
    seen.clear()
    assert summed_nll(step, [1, 2], None) == (2.0, 4.0)
    assert seen == [None, None]
