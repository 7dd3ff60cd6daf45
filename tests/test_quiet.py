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


LEAN_IMPORT = """
import gc, sys
import numpy as np
import tcnlm_tf, tensorflow, keras
from tcnlm_tf.quiet import LATE, LATE_PACKAGES
print(sorted(p for p in LATE_PACKAGES if p in sys.modules), gc.get_freeze_count() > 10**5)
assert all(name in sys.modules for name in LATE)     # TensorFlow imported every one
lite = sys.modules["tensorflow.lite.python.lite"]
print(int(lite._jit(lambda x: x * 2)(3)))
import jax
print(callable(jax.monitoring.record_scalar))
legacy = sys.modules["tensorflow.python.keras.engine.training_arrays_v1"]
print(legacy.issparse(np.zeros(2)), legacy.issparse(__import__("scipy.sparse").sparse.eye(2)))
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot, matplotlib.patches
gallery = sys.modules["keras.src.visualization.plot_image_gallery"]
figure = gallery.plt.figure()
print(type(figure).__name__, matplotlib.get_backend(),
      sys.modules["keras.src.visualization.plot_bounding_box_gallery"].patches.Patch
      is matplotlib.patches.Patch)
"""


def test_tensorflow_imports_lean_and_what_it_left_out_works_at_first_use():
    """TensorFlow's import, through the package, imports none of JAX, SciPy and matplotlib,
    and freezes what it made out of the cycle collector; the names of TensorFlow's and
    Keras's modules that would hold them work at their first use: TFLite's ``jax.jit``,
    the legacy loops' ``issparse``, the galleries' ``pyplot`` (with the backend a command
    chose) and ``patches``, and JAX gets the ``record_scalar`` Keras would have given it."""
    result = subprocess.run([sys.executable, "-c", LEAN_IMPORT], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["[] True", "6", "True", "False True",
                                          "Figure Agg True"]


def test_other_importers_get_the_left_out_packages_as_usual():
    """Only the modules named in LATE are kept from the packages: Keras on the JAX backend,
    imported by TensorFlow's own import, gets JAX."""
    code = ("import os, sys; os.environ['KERAS_BACKEND'] = 'jax'\n"
            "import tcnlm_tf, tensorflow, keras\n"
            "print(keras.backend.backend(), 'jax' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["jax True"]


EXIT_WITHOUT_COLLECTION = """
import gc
import tcnlm_tf, tensorflow
class Noted:
    def __init__(self, name):
        self.name, self.me = name, self          # a reference cycle: only a collection frees it
    def __del__(self):
        print(self.name, flush=True)
Noted("collected while running")
gc.collect()
Noted("left at exit")
"""


def test_objects_made_after_the_import_are_collected_while_running_but_not_walked_at_exit():
    """After TensorFlow's import through the package, a reference cycle is collected as usual
    while the process runs; one left when it exits is frozen with the rest, so the exit's
    collections (half a second of CPU time after four tiny models' training) have nothing
    to walk."""
    result = subprocess.run([sys.executable, "-c", EXIT_WITHOUT_COLLECTION], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["collected while running"]
