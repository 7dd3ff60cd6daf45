"""A quiet start: TensorFlow's start-up lines (absl's notice, oneDNN, the CUDA stub, cuInit on
a machine without a GPU) do not reach the user, and anything else written to standard error
meanwhile still does."""
import os
import subprocess
import sys

from tcnlm_tf.quiet import filtered_stderr
from tests.conftest import REPO_ROOT


def test_noise_is_dropped_and_other_lines_are_kept(capfd):
    with filtered_stderr():
        os.write(2, b"W0000 something that matters\n")
        os.write(2, b"E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called\n")
    err = capfd.readouterr().err
    assert err == "W0000 something that matters\n"


def test_importing_tensorflow_after_the_package_prints_nothing():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", "import tcnlm_tf, tensorflow as tf; print(float(tf.constant(2.0)"
         " + 1))"], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "3.0\n"
    assert result.stderr == ""


DEFERRED_PYPLOT = """
import sys
import tcnlm_tf, tensorflow, keras
plt = sys.modules["matplotlib.pyplot"]         # imported by Keras, not yet executed
print(type(plt).__name__)
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
figure = matplotlib.pyplot.figure()
print(type(plt).__name__, matplotlib.get_backend(), type(figure).__name__)
"""


def test_pyplot_is_loaded_when_first_used():
    """TensorFlow's import (through Keras) leaves ``matplotlib.pyplot`` unexecuted; a
    command that plots gets the whole module, with the backend it chose."""
    result = subprocess.run([sys.executable, "-c", DEFERRED_PYPLOT], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["_LazyModule", "module Agg Figure"]
