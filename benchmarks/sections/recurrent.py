"""The ``recurrent`` section: the recurrent layers against ``keras.layers.LSTM`` of the same
size on the same batch, x [B, L, n_x] (normal noise) and topic vectors t [B, T]
(Dirichlet(1), fixed seed):

``keras LSTM`` (the reference); ``LSTM, x W hoisted``, :class:`layers.hoisted_lstm.HoistedLSTM`
with ``hoist=True`` (the same LSTM with x W + b computed for all L steps before the loop,
which the project's LSTM models run); ``TC-LSTM, step by step``,
i.e. ``keras.layers.RNN(TopicCompositionalLSTMCell(..., input_gates_given=False))`` from
``initial_state=cell.topic_state(t)``, which computes the input half of eq. 13-14 inside the
recurrence (the baseline of the hoisting); ``TC-LSTM (layer)``, ``TopicCompositionalLSTM``
on ``[x, t]``, which computes it for all L steps before the loop (under TensorFlow its loop
is :func:`layers.topic_lstm_recurrence.topic_lstm_recurrence`); ``MoE LSTM``,
``MixtureOfExpertsLSTM(MixtureOfExpertsLSTMCell(n_h, num_experts=K))``, as the naive MoE
model runs it (``keras.layers.RNN`` over the cell, with x W + b computed before the loop
under TensorFlow).

The loss is the sum of the outputs [B, L, n_h] (MoE: [B, L, K n_h]). Besides the time, the
table gives each layer's multiply-adds per token relative to the LSTM's
(:func:`multiply_adds_per_token`), the ratio the time would have if every multiply-add cost
the same (the "floor"), and how far the measured ratio is above it.

It runs under every Keras backend: the step is compiled as
:func:`benchmarks.harness.gradient_step` says (under TensorFlow a ``tf.function`` of a
``tf.GradientTape`` step, under JAX ``jax.jit`` of ``jax.value_and_grad``, under PyTorch
eager autograd), and the table's heading names the backend. The ratios compare layers under
one backend. Under PyTorch on a CPU, ``keras.layers.LSTM`` runs Keras's own loop of torch
calls (its input products hoisted), the other layers Keras's generic recurrence, which calls
the cell as a Keras layer at every step, eagerly; so there the ratios measure that
per-step overhead as much as the layers' arithmetic.

Its flags (the "sizes" group) also give the decoders section its hidden and embedding sizes,
and the models section the topic count of the models whose compare row does not pin one.
"""
from __future__ import annotations

import argparse

from benchmarks.harness import (STEP_COMPILED, accelerator, gradient_step, print_table, ratio,
                                time_contenders, unique)
from tcnlm_tf.arguments import integer
from tcnlm_tf.errors import UserError

#: the Keras backends it runs under
BACKENDS = ("tensorflow", "jax", "torch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sizes = parser.add_argument_group("sizes (recurrent; the decoders use the hidden and input "
                                      "sizes as their hidden and embedding sizes)")
    sizes.add_argument("--batch-size", type=integer(1), default=64,
                       help="sequences B (default: 64)")
    sizes.add_argument("--seq-len", type=integer(1), default=30, help="steps L (default: 30)")
    sizes.add_argument("--input-size", type=integer(1), default=300,
                       help="input size n_x (default: 300)")
    sizes.add_argument("--hidden-size", type=integer(1), default=600,
                       help="hidden size n_h (default: 600)")
    sizes.add_argument("--num-factors", type=integer(1), default=None,
                       help="TC-LSTM factors per gate n_f (default: the hidden size)")
    sizes.add_argument("--num-topics", type=integer(1), default=50,
                       help="topics T of the TC-LSTM, and of the topic models of the models "
                            "section whose compare row does not pin its own (default: 50)")
    sizes.add_argument("--moe-experts", type=integer(1), default=10,
                       help="experts K of the MoE LSTM (default: 10)")


def check(args: argparse.Namespace) -> None:
    """The sizes need nothing beyond the flags' types (integers of at least 1); the
    precisions, :func:`cudnn_precision_problem` when the recurrent section runs."""
    if "recurrent" in args.sections:
        import keras

        problem = cudnn_precision_problem(keras.backend.backend(), accelerator(),
                                          args.precisions)
        if problem:
            raise UserError(problem)


def cudnn_precision_problem(backend: str, device: str | None,
                            precisions: list[str]) -> str | None:
    """Why the reference ``keras.layers.LSTM`` cannot run at ``precisions`` under ``backend``
    on ``device`` (``None``: the CPU), or ``None``: under JAX on a GPU Keras runs it with
    cuDNN through ``jax.experimental.rnn``, which takes float32 only (a reduced-precision
    policy fails there with "Unknown output type bfloat16")."""
    reduced = [p for p in precisions if p != "float32"]
    if backend == "jax" and device is not None and reduced:
        return (f"--precisions {','.join(reduced)}: under JAX on a GPU ({device}) "
                "keras.layers.LSTM, the reference of the recurrent section, runs cuDNN "
                "through jax.experimental.rnn, which takes float32 only; use --precisions "
                "float32")
    return None


def multiply_adds_per_token(input_size: int, hidden_size: int, num_factors: int,
                            num_topics: int, seq_len: int, num_experts: int) -> dict[str, float]:
    """Forward multiply-adds per token of the weights' products (no biases, no element-wise
    work) of the recurrent layers, for input size n_x, hidden size n_h, n_f factors per gate,
    T topics, sequences of L tokens and K experts:

    * ``lstm``: ``4 n_h (n_x + n_h)`` (four gates from x and h);
    * ``tc``, the TC-LSTM (both ways of running it do the same products):
      ``4 n_f n_x`` (W_c x) ``+ 4 n_f n_h`` (U_c h) ``+ 2 * 4 n_f n_h`` (W_a and U_a of the
      four gates) ``+ 2 T 4 n_f / L`` (W_b t and U_b t, once per sequence);
    * ``moe``: ``K 4 n_h (n_x + n_h)``, K LSTMs.
    """
    n_x, n_h, n_f, T, L, K = (input_size, hidden_size, num_factors, num_topics, seq_len,
                              num_experts)
    lstm = 4 * n_h * (n_x + n_h)
    tc = 4 * n_f * n_x + 4 * n_f * n_h + 2 * 4 * n_f * n_h + 2 * T * 4 * n_f / L
    return {"lstm": float(lstm), "tc": float(tc), "moe": float(K * lstm)}


def run(args: argparse.Namespace) -> None:
    """Times one training step (forward, and backward to every weight and the inputs x and
    t) of each recurrent layer on x [B, L, n_x] and t [B, T], under each precision of
    ``--precisions`` (the layers' dtype policy: float32 weights, products in the policy's
    compute dtype); the loss is the float32 sum of the outputs [B, L, n_h] ([B, L, K n_h]
    for the MoE). Every (layer, precision) pair is a contender of the same rounds; the
    ratios compare layers under the same precision.

    Under TensorFlow x and t are ``tf.Variable``s and the loss ``tf.reduce_sum``; under the
    other backends they are Keras variables, read with ``keras.ops.convert_to_tensor``,
    and the loss ``keras.ops.sum``."""
    import keras
    import numpy as np

    from layers.hoisted_lstm import HoistedLSTM
    from layers.mixture_of_experts import MixtureOfExpertsLSTM, MixtureOfExpertsLSTMCell
    from layers.topic_lstm import TopicCompositionalLSTM, TopicCompositionalLSTMCell

    B, L, n_x, n_h, T = (args.batch_size, args.seq_len, args.input_size, args.hidden_size,
                         args.num_topics)
    n_f, K = args.num_factors or n_h, args.moe_experts
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x_value = rng.normal(size=(B, L, n_x)).astype("float32")
    t_value = rng.dirichlet(np.ones(T), size=B).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x, t = tf.Variable(x_value, name="x"), tf.Variable(t_value, name="t")

        def read(v):
            return v

        def total(outputs):
            return tf.reduce_sum(tf.cast(outputs, tf.float32))
    else:
        x = keras.Variable(x_value, name="x", autocast=False)
        t = keras.Variable(t_value, name="t", autocast=False)
        read = keras.ops.convert_to_tensor

        def total(outputs):
            return keras.ops.sum(keras.ops.cast(outputs, "float32"))

    def layers_under(policy: str) -> dict:
        """name -> (forward pass, layer, the inputs it reads, key of multiply_adds_per_token)
        for layers of dtype policy ``policy``."""
        lstm = keras.layers.LSTM(n_h, return_sequences=True, dtype=policy, name="lstm")
        hoisted = HoistedLSTM(n_h, return_sequences=True, hoist=True, dtype=policy,
                              name="hoisted_lstm")
        cell = TopicCompositionalLSTMCell(n_h, n_f, T, input_gates_given=False, dtype=policy,
                                          name="tc_cell")
        stepwise = keras.layers.RNN(cell, return_sequences=True, dtype=policy,
                                    name="tc_stepwise")
        tc_layer = TopicCompositionalLSTM(n_h, n_f, T, dtype=policy, name="tc_lstm")
        moe = MixtureOfExpertsLSTM(MixtureOfExpertsLSTMCell(n_h, num_experts=K, dtype=policy),
                                   return_sequences=True, dtype=policy, name="moe")
        return {
            "keras LSTM": (lambda: lstm(read(x)), lstm, [x], "lstm"),
            "LSTM, x W hoisted": (lambda: hoisted(read(x)), hoisted, [x], "lstm"),
            "TC-LSTM, step by step": (
                lambda: stepwise(read(x), initial_state=cell.topic_state(read(t))), stepwise,
                [x, t], "tc"),
            "TC-LSTM (layer)": (lambda: tc_layer([read(x), read(t)]), tc_layer, [x, t], "tc"),
            f"MoE LSTM (K={K})": (lambda: moe(read(x)), moe, [x], "moe"),
        }

    layers = {precision: layers_under(precision) for precision in args.precisions}
    contenders = {}
    for precision, named in layers.items():
        for name, (forward, layer, inputs, _) in named.items():
            forward()  # builds the weights eagerly, outside the traced step
            contenders[name, precision] = gradient_step(
                lambda f=forward: total(f()), inputs + unique(layer.trainable_weights))
    macs = multiply_adds_per_token(n_x, n_h, n_f, T, L, K)
    print(f"recurrent layers under the {backend} backend ({STEP_COMPILED[backend]}), "
          f"forward + backward: batch B={B} x L={L} tokens, n_x={n_x}, "
          f"n_h={n_h}, n_f={n_f}, T={T}, K={K}; precisions {', '.join(args.precisions)}; "
          f"floor = multiply-adds per token / the LSTM's ({macs['lstm']:,.0f})", flush=True)
    times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    rows = []
    for precision, named in layers.items():
        reference = times["keras LSTM", precision]["seconds"]
        for name, (_, _, _, kind) in named.items():
            seconds = times[name, precision]["seconds"]
            floor = macs[kind] / macs["lstm"]
            rows.append((name, precision, f"{seconds * 1e3:.2f}",
                         f"{seconds * 1e6 / (B * L):.1f}", ratio(seconds, reference),
                         f"{floor:.3f}x", f"{seconds / reference / floor:.2f}",
                         ratio(times[name, args.precisions[0]]["seconds"], seconds)))
    print_table(("layer", "precision", "ms/step", "µs/token", "time x LSTM",
                 "floor (MACs x LSTM)", "time ratio / floor",
                 f"speed-up over {args.precisions[0]}"), rows, left=2)
