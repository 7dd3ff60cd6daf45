"""A quiet start: TensorFlow imported and its devices found without their start-up noise.

TensorFlow's C++ side logs its first lines before absl's logging is set up, where
``TF_CPP_MIN_LOG_LEVEL`` does not reach: "All log messages before absl::InitializeLog() is
called are written to STDERR", the oneDNN and CUDA-stub notices and, on a machine without
a GPU, "failed call to cuInit" when the devices are first listed. :func:`install` (called
once, by the ``tcnlm_tf`` package) sets ``TF_CPP_MIN_LOG_LEVEL`` to 2 unless it is set and
wraps TensorFlow's first import, whoever triggers it: the import and the device discovery
run with the standard-error file descriptor captured, the lines of :data:`NOISE` are
dropped, and every other line is written back, so a real problem still shows.

The same import loads the modules of :data:`DEFERRED` lazily (``importlib.util.LazyLoader``:
the module is executed at its first attribute access): Keras, which TensorFlow imports,
imports ``matplotlib.pyplot`` for an image-gallery helper the project never calls, a quarter
of TensorFlow's import time, and each command that plots still gets the whole module when it
first uses it.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
from typing import Iterator

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


#: modules that TensorFlow's import brings in and the project uses late or never: loaded
#: lazily while TensorFlow is first imported (see the module docstring)
DEFERRED = ("matplotlib.pyplot",)


class _Deferred(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`DEFERRED` as usual, their loaders wrapped in
    ``importlib.util.LazyLoader``."""

    def find_spec(self, name, path=None, target=None):
        if name not in DEFERRED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


@contextlib.contextmanager
def deferred_imports() -> Iterator[None]:
    """While the block runs, the modules of :data:`DEFERRED` that get imported are loaded
    lazily."""
    finder = _Deferred()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as usual, with its loading wrapped in :func:`filtered_stderr`
    and followed by the device discovery (where the cuInit line comes from)."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)          # once: every later import finds it loaded
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            with filtered_stderr(), deferred_imports():
                load(module)
                module.config.list_physical_devices()

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Set ``TF_CPP_MIN_LOG_LEVEL`` (2, unless set) and quieten TensorFlow's first import,
    if it has not happened yet."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietTensorFlow) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())
