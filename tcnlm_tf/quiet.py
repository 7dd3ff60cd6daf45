"""A quiet start: TensorFlow imported and its devices found without their start-up noise.

TensorFlow's C++ side logs its first lines before absl's logging is set up, where
``TF_CPP_MIN_LOG_LEVEL`` does not reach: "All log messages before absl::InitializeLog() is
called are written to STDERR", the oneDNN and CUDA-stub notices and, on a machine without
a GPU, "failed call to cuInit" when the devices are first listed. :func:`install` (called
once, by the ``tcnlm_tf`` package) sets ``TF_CPP_MIN_LOG_LEVEL`` to 2 unless it is set and
wraps TensorFlow's first import, whoever triggers it: the import and the device discovery
run with the standard-error file descriptor captured, the lines of :data:`NOISE` are
dropped, and every other line is written back, so a real problem still shows.

The same import is kept lean (:func:`lean_import`): the modules of :data:`LATE` import
packages that the project never uses through them (JAX for TFLite's converter from JAX,
SciPy for TensorFlow's legacy Keras, matplotlib for Keras's image galleries), each under
``try/except ImportError``. While TensorFlow is imported those packages are not found from
those modules (they would take a third of its import time); afterwards each name such a
module kept is bound to the package, imported at its first use (:class:`LateModule`,
:func:`late_function`), so every feature behind them still works. Every other importer
(the project, the user, Keras on the JAX backend) gets the packages as usual.

Last, every object alive after that import (TensorFlow's and Keras's modules, which live as
long as the process) is moved out of the cycle collector's generations (``gc.freeze``):
its full collections, frequent while a step is traced, would otherwise walk them every
time. Objects made later are collected as usual while the process runs; when it exits, an
``atexit`` handler freezes them too, so the interpreter's two collections at exit walk
nothing (half a second of CPU time after four tiny models' training in one process). What
is left at exit then goes with the process without a collection: an object in a reference
cycle is not finalized, which is why the commands close their files and flush their
TensorBoard writers themselves before they return.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
import types
from typing import Any, Callable, Iterator

#: start-up lines of TensorFlow's C++ side that say nothing to a user on a CPU machine
NOISE = re.compile(
    r"All log messages before absl::InitializeLog|port\.cc:\d+\] oneDNN custom operations"
    r"|cudart_stub\.cc|failed call to cuInit|cuda_platform\.cc|cuda_executor\.cc"
    r"|cpu_feature_guard\.cc|rebuild TensorFlow with the appropriate compiler flags"
    r"|To enable the following instructions")


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """Standard error (the file descriptor, which C++ writes to) captured while the block
    runs; afterwards every captured line but :data:`NOISE` is written back."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(True)
                    if not NOISE.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


#: packages that TensorFlow's import would import for features the project never uses
LATE_PACKAGES = frozenset({"jax", "scipy", "matplotlib"})
#: the modules that would import them, each under ``try/except ImportError``: {module: {the
#: name it keeps: what the name holds, a module or ``module:function``}}
LATE = {
    # TFLite's converter from JAX (and the converter module's copy of the name)
    "tensorflow.lite.python.util": {"_jit": "jax:jit"},
    "tensorflow.lite.python.lite": {"_jit": "jax:jit"},
    # sparse inputs to TensorFlow's legacy (Keras 2) training loops
    "tensorflow.python.keras.engine.training_v1": {"issparse": "scipy.sparse:issparse"},
    "tensorflow.python.keras.engine.training_arrays_v1": {"issparse": "scipy.sparse:issparse"},
    # Keras's image and bounding-box galleries
    "keras.src.visualization.plot_image_gallery": {"plt": "matplotlib.pyplot"},
    "keras.src.visualization.plot_bounding_box_gallery": {"patches": "matplotlib.patches"},
    # Keras's Orbax callback keeps no name: it gives older JAX versions
    # jax.monitoring.record_scalar, which :class:`_KerasJaxShim` does at JAX's import
    "keras.src.callbacks.orbax_checkpoint": {},
}
#: the import machinery's own modules, passed over when looking for who imports
_MACHINERY = frozenset({"importlib._bootstrap", "importlib._bootstrap_external", __name__})


class LateModule(types.ModuleType):
    """Stands for the module ``name``, imported at the first attribute read from it."""

    def __init__(self, name: str):
        super().__init__(name, f"{name}, imported at its first use")

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attribute)


def late_function(module: str, function: str) -> Callable:
    """Stands for ``module.function``, with ``module`` imported at the first call."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"{module}.{function}, with {module} imported at the first call."
    return call


def _importer() -> str:
    """The name of the module whose code runs the import being looked up."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in _MACHINERY:
        frame = frame.f_back
    return "" if frame is None else frame.f_globals.get("__name__", "")


class _KeptOut(importlib.abc.MetaPathFinder):
    """The packages of :data:`LATE_PACKAGES`, not found from the modules of :data:`LATE`."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in LATE_PACKAGES and _importer() in LATE:
            raise ModuleNotFoundError(f"{name} is imported at its first use", name=name)
        return None


class _KerasJaxShim(importlib.abc.MetaPathFinder):
    """Finds ``jax`` as usual, once, and then does what Keras's Orbax callback module does
    at its import where JAX is installed: gives ``jax.monitoring`` a ``record_scalar`` that
    does nothing where the JAX version lacks it."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            if not hasattr(module.monitoring, "record_scalar"):
                module.monitoring.record_scalar = lambda *args, **kwargs: None

        spec.loader.exec_module = exec_module
        return spec


def _bind_late() -> None:
    """Each name of :data:`LATE` that its module holds as None (the import it tried was
    kept out) bound to what it stands for, where that package is installed."""
    for module_name, names in LATE.items():
        module = sys.modules.get(module_name)
        for name, target in names.items():
            if module is None or getattr(module, name, False) is not None:
                continue
            where, _, function = target.partition(":")
            if importlib.util.find_spec(where.split(".")[0]) is None:
                continue
            setattr(module, name, late_function(where, function) if function
                    else LateModule(where))
    if ("keras.src.callbacks.orbax_checkpoint" in sys.modules and "jax" not in sys.modules
            and importlib.util.find_spec("jax") is not None):
        sys.meta_path.insert(0, _KerasJaxShim())


@contextlib.contextmanager
def lean_import() -> Iterator[None]:
    """While the block runs, the packages of :data:`LATE` are kept out of the modules that
    would import them; afterwards those modules' names are bound late (:func:`_bind_late`)."""
    finder = _KeptOut()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
    _bind_late()


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as usual, with its loading wrapped in :func:`filtered_stderr`
    and :func:`lean_import` and followed by the device discovery (where the cuInit line
    comes from) and ``gc.freeze``, now and at exit."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)          # once: every later import finds it loaded
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            with filtered_stderr():
                with lean_import():
                    load(module)
                module.config.list_physical_devices()
            gc.freeze()
            atexit.register(gc.freeze)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Set ``TF_CPP_MIN_LOG_LEVEL`` (2, unless set) and quieten TensorFlow's first import,
    if it has not happened yet."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietTensorFlow) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())
