"""``python -m tests.backend_check --backend B --out FILE [--weights FILE] CASE ...``: the
layer cases of ``tests/test_keras_reuse.py`` under one Keras backend, in a process of its
own (the backend is fixed when Keras is first imported).

For each case (a layer class name) it builds the case's functional model, loads the weights
of ``--weights`` (an ``.npz`` this script wrote under another backend; without it, the
model's own initial weights are what it writes), and records in ``--out``:

``<case>/weight<i>``   the weights used (``model.get_weights()`` order)
``<case>/output<i>``   the model's outputs on the case's inputs
``<case>/finite``      whether one SGD step of ``fit`` (MSE to zero targets) left every
                       weight finite, ``<case>/moved`` whether it changed any (the
                       gradients are finite and not all zero), ``<case>/trainable`` how
                       many trainable weights the model has (none: nothing to move)
``<case>/reloaded``    the largest difference between the predictions of the ``.keras``
                       round trip and the model's

and, for an output layer (a case of one input whose layer has ``target_log_prob``, the
training path of the project's models), with the weights above:

``<case>/target``          ``target_log_prob`` of the case's input at fixed targets
``<case>/target_vs_call``  its largest difference from ``call``'s log-probabilities
                           gathered at the same targets
``<case>/target_finite``,  whether one SGD step through ``target_log_prob`` (a model
``<case>/target_moved``    of ``[hidden, targets]`` minimising its negative mean) left
                           every weight finite and changed any
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def backend_env(backend: str, home: Path) -> dict[str, str]:
    """The environment of a subprocess under Keras backend ``backend`` (fixed when Keras is
    first imported): the repository on the path, TensorFlow's log quiet, ``home`` as its
    home directory (Keras writes its config there)."""
    from tests.conftest import REPO_ROOT

    return {"KERAS_BACKEND": backend, "PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin",
            "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": str(home)}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.backend_check", allow_abbrev=False,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", required=True, choices=("tensorflow", "jax", "torch"))
    p.add_argument("--out", type=Path, required=True, help=".npz to write")
    p.add_argument("--weights", type=Path, help=".npz of weights to load")
    p.add_argument("cases", nargs="+", help="layer class names of test_keras_reuse.CASES")
    return p.parse_args(argv)


def check_target_log_prob(name: str, layer, model, inputs, record: dict) -> None:
    """The ``<case>/target*`` entries of the module docstring for an output layer."""
    import keras
    import numpy as np

    class TargetLogProb(keras.layers.Layer):
        """``[hidden, targets]`` -> the wrapped layer's ``target_log_prob``."""

        def __init__(self, inner, **kwargs):
            super().__init__(**kwargs)
            self.inner = inner

        def call(self, hidden, targets):
            return self.inner.target_log_prob(hidden, targets, training=True)

    hidden = inputs[0]
    targets = np.random.default_rng(2).integers(0, layer.vocab_size, hidden.shape[:-1])
    target = keras.ops.convert_to_numpy(layer.target_log_prob(hidden, targets))
    log_p = np.asarray(model.predict(inputs, verbose=0))
    record[f"{name}/target"] = target
    record[f"{name}/target_vs_call"] = np.asarray(np.max(np.abs(
        np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0] - target)))
    h = keras.Input(hidden.shape[1:])
    t = keras.Input(targets.shape[1:], dtype="int32")
    trainer = keras.Model([h, t], TargetLogProb(layer)(h, t))
    trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                    loss=lambda _, log_prob: -keras.ops.mean(log_prob))
    before = [np.array(w) for w in layer.get_weights()]
    trainer.fit([hidden, targets], np.zeros(targets.shape, np.float32),
                batch_size=len(hidden), epochs=1, verbose=0)
    after = layer.get_weights()
    record[f"{name}/target_finite"] = np.asarray(all(np.isfinite(w).all() for w in after))
    record[f"{name}/target_moved"] = np.asarray(any(not np.array_equal(a, b)
                                                    for a, b in zip(before, after)))


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ["KERAS_BACKEND"] = args.backend
    import keras
    import numpy as np

    from tests.test_keras_reuse import CASES

    if keras.backend.backend() != args.backend:
        sys.exit(f"error: Keras was imported with the {keras.backend.backend()} backend")
    builders = {cls.__name__: build for cls, build in CASES.items()}
    given = np.load(args.weights) if args.weights else None
    record: dict[str, np.ndarray] = {}
    scratch = Path(tempfile.mkdtemp(prefix="tcnlm-backend-"))
    for name in args.cases:
        keras.utils.set_random_seed(0)
        model, layer, inputs = builders[name]()
        if given is not None:
            model.set_weights([given[f"{name}/weight{i}"]
                               for i in range(len(model.get_weights()))])
        for i, weight in enumerate(model.get_weights()):
            record[f"{name}/weight{i}"] = weight
        outputs = keras.tree.flatten(model.predict(inputs, verbose=0))
        for i, output in enumerate(outputs):
            record[f"{name}/output{i}"] = np.asarray(output)
        if hasattr(layer, "target_log_prob") and len(inputs) == 1:
            check_target_log_prob(name, layer, model, inputs, record)
            model.set_weights([record[f"{name}/weight{i}"]
                               for i in range(len(model.get_weights()))])
        model.save(scratch / f"{name}.keras")
        reloaded = keras.tree.flatten(
            keras.saving.load_model(scratch / f"{name}.keras").predict(inputs, verbose=0))
        record[f"{name}/reloaded"] = np.asarray(max(
            float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(outputs,
                                                                                  reloaded)))
        before = model.get_weights()
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=["mse"] * len(outputs))
        model.fit(inputs, [np.zeros_like(o) for o in outputs], batch_size=len(inputs[0]),
                  epochs=1, verbose=0)
        after = model.get_weights()
        record[f"{name}/finite"] = np.asarray(all(np.isfinite(w).all() for w in after))
        record[f"{name}/moved"] = np.asarray(any(not np.array_equal(a, b)
                                                 for a, b in zip(before, after)))
        record[f"{name}/trainable"] = np.asarray(len(model.trainable_weights))
    np.savez(args.out, **record)


if __name__ == "__main__":
    main()
