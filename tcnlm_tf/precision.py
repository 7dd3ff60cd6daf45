"""Training precision (``--precision``): which Keras dtype policy a run's layers are built
under.

* ``float32``: everything in float32.
* ``mixed_bfloat16``: variables stay float32; the language model's matrix products (the
  embedding, the recurrent layers, the output layer's logits) run in bfloat16, which
  TensorFlow runs through oneDNN on CPUs with AVX512_BF16 or AMX and in hardware on
  NVIDIA GPUs from Ampere (compute capability 8.0) on. Its exponent range is float32's, so it
  needs no loss scaling.
* ``mixed_float16``: the same in float16 (GPUs from compute capability 7.0), with dynamic
  loss scaling (``keras.optimizers.LossScaleOptimizer``) against gradient underflow.

Under either mixed policy what is numerically delicate stays float32: the model container
itself (the loss sums, the batch's weights, the carried state: :class:`LanguageModel`), the
output layers' normalisers (log-softmax, log-sum-exp, the adaptive softmax's, the sememe
decoder's and the mixture of softmaxes' normalisation: their logits are cast to float32
first), and the layers built with :data:`FLOAT32` whatever the policy: the topic models
(TCNLM's and Topic-RNN's inference networks with their KL and reconstruction, TDLM's
convolutional topic model, the LDA E-step), which cost little beside the language model.
Checkpoints hold the float32 variables under every policy, so a run trained under one loads
under any other, and exports (:mod:`tcnlm_tf.serving.module`) return float32.

This module imports TensorFlow and Keras only when a model is built.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Iterator

#: --precision choices
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
#: the dtype policy of the layers that stay float32 under every precision (the topic models)
FLOAT32 = "float32"


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether the CPU computes bfloat16 products natively (the ``avx512_bf16`` or
    ``amx_bf16`` flag in ``/proc/cpuinfo``; False where that file cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


@functools.lru_cache(maxsize=1)
def gpus_have_bf16() -> bool | None:
    """None without a GPU, else whether every visible GPU has compute capability >= 8.0."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    capabilities = [tf.config.experimental.get_device_details(gpu).get("compute_capability")
                    for gpu in gpus]
    return all(c is not None and tuple(c) >= (8, 0) for c in capabilities)


def slow_precision_warning(precision: str, gpus_bf16: bool | None, cpu_bf16: bool
                           ) -> str | None:
    """A warning when ``precision`` would run emulated on this machine (``gpus_bf16``: as
    :func:`gpus_have_bf16`, ``cpu_bf16``: as :func:`cpu_has_bf16`), else None."""
    if precision == "mixed_bfloat16" and not (cpu_bf16 if gpus_bf16 is None else gpus_bf16):
        where = ("its CPU has no AVX512_BF16 or AMX_BF16" if gpus_bf16 is None
                 else "a GPU has compute capability below 8.0")
        return (f"warning: --precision mixed_bfloat16 on a machine without native bfloat16 "
                f"products ({where}): they are emulated and likely slower than float32")
    if precision == "mixed_float16" and gpus_bf16 is None:
        return ("warning: --precision mixed_float16 without a GPU: CPUs compute float16 "
                "products slowly; use float32, or mixed_bfloat16 on a CPU with AVX512_BF16")
    return None


def warn_if_slow(precision: str) -> None:
    """Print :func:`slow_precision_warning` for this machine to stderr, if any."""
    import sys

    message = slow_precision_warning(precision, gpus_have_bf16(), cpu_has_bf16())
    if message:
        print(message, file=sys.stderr)


#: what --help says of the default (TrainConfig.precision, float32)
DEFAULT_PRECISION_HELP = ("float32: trained to convergence on APNEWS, mixed_bfloat16 was "
                          "within 1 %% of its test perplexity (LSTM +0.41 %%, TCNLM -0.03 %%; "
                          "RESULTS.md), but it is faster only on CPUs with fast bfloat16 "
                          "units and slower elsewhere; docs/training.md")



@contextlib.contextmanager
def building(precision: str) -> Iterator[None]:
    """Layers created inside take ``precision``'s dtype policy (Keras reads the global
    policy when a layer is constructed); the previous policy is restored on exit."""
    import keras

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
