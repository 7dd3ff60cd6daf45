"""The layers on every Keras 3 backend: each layer case of
``tests/test_keras_reuse.py`` runs under ``KERAS_BACKEND=jax`` and ``torch`` in a process of
its own (``tests/backend_check.py``) with the weights the TensorFlow backend made, and must
give the TensorFlow backend's outputs to 1e-5, train one step with finite gradients that are
not all zero (a model with trainable weights), and reload from ``.keras`` with the same
predictions.

Every layer is checked (:data:`LAYERS`), and importing ``layers`` under JAX or PyTorch loads
no TensorFlow (a JAX or PyTorch user needs none installed; checked in the encoder's draws
test, one subprocess per backend)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.backend_check import backend_env
from tests.conftest import REPO_ROOT
from tests.test_keras_reuse import CASES, readme_example

pytestmark = pytest.mark.slow

BACKENDS = ("jax", "torch")
LAYERS = ("BagOfWords", "TiedSoftmax", "TopicCompositionalLSTM", "TopicCompositionalLSTMCell",
          "TopicState", "MixtureOfExpertsLSTMCell", "MixtureOfExpertsLSTM",
          "DocumentConvolution", "TopicAttention", "ConvolutionalTopicModel", "TopicGate",
          "ContextAttention", "LateFusionLSTM", "LateFusionLSTMCell", "GaussianEncoder",
          "NeuralTopicModel", "TopicRNNInference", "AdaptiveSoftmax", "TopicRNNOutput",
          "MixtureOfSoftmaxes", "LDAInference", "SememeDecoder", "HoistedLSTM")
#: the output layers: ``backend_check`` also checks their ``target_log_prob``, the training
#: path of the project's models
OUTPUT_LAYERS = ("AdaptiveSoftmax", "MixtureOfSoftmaxes", "SememeDecoder", "TiedSoftmax")


def check(backend: str, out, weights=None) -> dict[str, np.ndarray]:
    """What ``tests/backend_check.py`` records for :data:`LAYERS` under ``backend``."""
    command = [sys.executable, "-m", "tests.backend_check", "--backend", backend,
               "--out", str(out), *LAYERS]
    if weights is not None:
        command[5:5] = ["--weights", str(weights)]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(out) as saved:
        return {name: saved[name] for name in saved.files}


def assert_trains_and_reloads(record: dict[str, np.ndarray], backend: str) -> None:
    for name in LAYERS:
        assert record[f"{name}/finite"], f"{name} under {backend}: a weight became non-finite"
        assert record[f"{name}/moved"] or not record[f"{name}/trainable"], \
            f"{name} under {backend}: one step changed no weight"
        assert record[f"{name}/reloaded"] <= 1e-6, f"{name} under {backend}: .keras reload"
        if f"{name}/target" in record:
            assert record[f"{name}/target_vs_call"] <= 1e-5, \
                f"{name} under {backend}: target_log_prob is not call() at the targets"
            assert record[f"{name}/target_finite"] and record[f"{name}/target_moved"], \
                f"{name} under {backend}: a step through target_log_prob"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The TensorFlow backend's record (its weights are what the other backends load)."""
    out = tmp_path_factory.mktemp("backends") / "tensorflow.npz"
    return out, check("tensorflow", out)


def test_every_layer_is_checked():
    assert set(LAYERS) == {cls.__name__ for cls in CASES}


def test_the_tensorflow_backend_trains_and_reloads(reference):
    assert_trains_and_reloads(reference[1], "tensorflow")
    checked = {name for name in LAYERS if f"{name}/target" in reference[1]}
    assert checked == set(OUTPUT_LAYERS), "target_log_prob checked for these"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_layers_compute_as_under_tensorflow(backend, reference, tmp_path):
    weights, expected = reference
    record = check(backend, tmp_path / f"{backend}.npz", weights)
    for name, want in expected.items():
        if "/output" in name or "/weight" in name or name.endswith("/target"):
            np.testing.assert_allclose(record[name], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} under {backend}")
    assert_trains_and_reloads(record, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_readme_functional_example_runs_as_written(backend, tmp_path):
    """``KERAS_BACKEND=<backend> python example.py``, the README's example as written (it
    fits, saves, reloads and compares predictions itself)."""
    script = tmp_path / "example.py"
    script.write_text(readme_example() + "\nprint('backend', keras.backend.backend(), "
                      "'steps', int(model.optimizer.iterations.numpy()))\n")
    env = backend_env(backend, tmp_path)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"backend {backend} steps 4" in result.stdout
    assert (tmp_path / "topic_lm.keras").is_file()


#: Under ``KERAS_BACKEND``: a GaussianEncoder whose posterior is N(mu, sigma^2) whatever the
#: counts (zero kernels), sampled on 20,000 rows twice; prints the draws' mean and standard
#: deviation per coordinate, whether the two calls drew differently, the KL, and which of
#: tensorflow and tensorflow_probability importing ``layers`` loaded (neither may be; under
#: JAX the draws load TFP's JAX substrate afterwards, which needs no TensorFlow).
DRAWS = """
import json, sys, keras, numpy as np
from layers import GaussianEncoder
loaded = sorted(m for m in ("tensorflow", "tensorflow_probability") if m in sys.modules)
layer = GaussianEncoder(4, 3, hidden_units=(), prior_mean=0.5, prior_stddev=2.0)
layer.build((None, 4))
layer.set_weights([np.zeros((4, 3)), np.array([-1.0, 0.0, 2.0]), np.zeros((4, 3)),
                   np.log(np.array([0.25, 1.0, 4.0]))])
d = np.ones((20000, 4), np.float32)
first = keras.ops.convert_to_numpy(layer(d, sample=True)["theta"])
out = layer(d, sample=True)
second = keras.ops.convert_to_numpy(out["theta"])
print(json.dumps({"tensorflow": loaded, "mean": first.mean(0).tolist(),
                  "std": first.std(0).tolist(),
                  "differ": bool(np.mean(first == second) < 0.01),
                  "kl": keras.ops.convert_to_numpy(out["kl"])[:2].tolist()}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gaussian_encoder_draws_from_its_posterior(backend, tmp_path):
    """Under JAX (TFP's JAX substrate) and PyTorch (no TFP substrate: the
    reparameterisation and closed-form KL in keras.ops) theta is a draw mu + sigma * eps from
    q(theta|d) = N(mu, sigma^2), a fresh one each call, and the KL to N(mu_0, sigma_0^2) is
    the closed form."""
    env = backend_env(backend, tmp_path)
    result = subprocess.run([sys.executable, "-c", DRAWS], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    mu, sigma = np.array([-1.0, 0.0, 2.0]), np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(got["mean"], mu, atol=5 * sigma.max() / np.sqrt(20000))
    np.testing.assert_allclose(got["std"], sigma, rtol=0.03)
    # a fresh draw: not one coordinate in 100 repeats (a reused seed repeats all of them;
    # independent float32 draws can still meet in a few of the 60,000)
    assert got["differ"], f"two calls under {backend} drew the same theta"
    assert got["tensorflow"] == [], f"importing layers under {backend} loaded {got['tensorflow']}"
    kl = 0.5 * (((mu - 0.5) ** 2 + sigma ** 2) / 4.0 - 1.0 - np.log(sigma ** 2 / 4.0)).sum()
    np.testing.assert_allclose(got["kl"], [kl, kl], rtol=1e-5)
