"""What made a run: the code, the command and the machine, stored in its ``metrics.json``.

Every ``python -m train.run`` (a fresh run and each ``--resume``) appends one entry to the
run's ``provenance`` list (:func:`collect`)::

    {"from_step": 0,                       # the optimiser step this invocation started at
     "commit": "6ac8e0e…", "dirty": false,  # the code's git commit, and whether tracked
                                            # files differed from it (None: not a checkout)
     "command": "python -m train.run --dataset apnews --data-dir <data-dir> …",
     "threads": {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                 "cpus_available": 2},
     "cpu": "AMD EPYC …", "bf16_units": "AVX512_BF16 without AMX",
     "platform": "Linux-…-x86_64",
     "versions": {"python": "3.11.7", "tensorflow": "2.21.0", …}}

A record under ``results/`` is meant to be read on other machines, so nothing here names a
path of the machine that made it: the values of the location flags (``--data-dir``,
``--runs-dir``, ``--cache-dir``) are written as ``<data-dir>``, ``<runs-dir>`` and
``<cache-dir>``, and a path inside the data directory as ``<data-dir>/…``
(:func:`portable_path`; :func:`expand_path` turns it back). Same commit and same seed give
the same numbers (the determinism test); across commits they may differ, which is why each
entry names its commit.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

#: the placeholder of the data directory in portable paths and commands
DATA_DIR = "<data-dir>"
#: flags whose value is a location on the machine, and the placeholder each is written as
LOCATION_FLAGS = {"--data-dir": DATA_DIR, "--runs-dir": "<runs-dir>",
                  "--cache-dir": "<cache-dir>"}
#: TensorFlow's thread-pool sizes, read from the environment when it starts
THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
#: the distributions whose versions a run records
PACKAGES = ("tensorflow", "keras", "tensorflow-probability", "numpy", "h5py", "gensim",
            "scipy")
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def portable_path(path: str | None, data_dir: str | Path | None) -> str | None:
    """``path`` with the data directory written as ``<data-dir>`` where it lies inside it
    (any other path is kept as it is)."""
    if path is None or data_dir is None:
        return path
    try:
        inside = Path(path).resolve().relative_to(Path(data_dir).resolve())
    except ValueError:
        return path
    return f"{DATA_DIR}/{inside.as_posix()}"


def expand_path(path: str | None, data_dir: str | Path) -> str | None:
    """A :func:`portable_path` read back on this machine, ``<data-dir>`` being
    ``data_dir``."""
    if path is None or not path.startswith(DATA_DIR + "/"):
        return path
    return str(Path(data_dir).resolve() / path[len(DATA_DIR) + 1:])


def portable_command(argv: list[str], data_dir: str | Path | None) -> str:
    """The ``python -m train.run`` command line of ``argv`` with every location flag's
    value replaced by its placeholder and paths inside ``data_dir`` made portable."""
    words, location = [], None
    for arg in argv:
        flag, equals, value = arg.partition("=")
        if location is not None:
            words.append(location)
            location = None
        elif flag in LOCATION_FLAGS:
            if equals:
                words.append(f"{flag}={LOCATION_FLAGS[flag]}")
            else:
                words.append(arg)
                location = LOCATION_FLAGS[flag]
        else:
            words.append(portable_path(arg, data_dir) if os.sep in arg else arg)
    return shlex.join(["python", "-m", "train.run", *words])


@functools.lru_cache(maxsize=None)
def code_version(root: Path = SOURCE_ROOT) -> tuple[str | None, bool | None]:
    """(the git commit of the code in ``root``, whether a tracked file differs from it);
    (None, None) where ``root`` is not a git checkout or git is missing."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return None, None
        status = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip()) if not status.returncode else None


def _cpuinfo(field: str) -> str | None:
    """The value of the first ``field`` line of ``/proc/cpuinfo`` (None where there is
    none or the file cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``; else what ``platform`` says)."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The processor's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    return set((_cpuinfo("flags") or "").split())


def bf16_units() -> str:
    """What the processor has for bfloat16 products, as oneDNN and PyTorch use them:
    ``"AMX_BF16 and AVX512_BF16"``, ``"AVX512_BF16 without AMX"``, ``"none"``, or
    ``"unknown"`` where the flags cannot be read. A CPU's name does not tell: on two
    2-core machines that both call their CPU "Intel(R) Xeon(R) Processor", the LSTM's
    ``mixed_bfloat16`` training step ran 1.3x faster than its float32 one with AMX and 1.6x
    slower without (``results/benchmarks/speed/``)."""
    flags = cpu_flags()
    if not flags:
        return "unknown"
    if "amx_bf16" in flags:
        return "AMX_BF16 and AVX512_BF16" if "avx512_bf16" in flags else "AMX_BF16"
    return "AVX512_BF16 without AMX" if "avx512_bf16" in flags else "none"


def versions() -> dict[str, str | None]:
    """Python's and :data:`PACKAGES`' versions (None: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def collect(argv: list[str] | None, data_dir: str | Path | None, from_step: int
            ) -> dict[str, Any]:
    """This invocation's provenance entry (see the module docstring); ``argv``: the
    command's arguments (None: ``sys.argv[1:]``)."""
    commit, dirty = code_version()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "from_step": int(from_step),
        "commit": commit,
        "dirty": dirty,
        "command": portable_command(sys.argv[1:] if argv is None else list(argv), data_dir),
        "threads": {**{name: os.environ.get(name) for name in THREAD_VARIABLES},
                    "cpus_available": cpus},
        "cpu": cpu_model(),
        "bf16_units": bf16_units(),
        "platform": platform.platform(),
        "versions": versions(),
    }


def commits(metrics: dict) -> list[str]:
    """The distinct commits a run's ``metrics`` say trained it, in order ("unknown" for an
    entry without one; empty for a run made before provenance was recorded)."""
    seen: list[str] = []
    for entry in metrics.get("provenance", []):
        commit = (entry.get("commit") or "unknown") + ("+dirty" if entry.get("dirty") else "")
        if commit not in seen:
            seen.append(commit)
    return seen


def portable(value: Any, data_dir: str | Path | None) -> Any:
    """A JSON value (a record's config, metrics, coherence) with every string that is
    ``data_dir`` or a path inside it written with ``<data-dir>`` (:func:`portable_path`)."""
    if data_dir is None:
        return value
    if isinstance(value, dict):
        return {key: portable(item, data_dir) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item, data_dir) for item in value]
    if isinstance(value, str) and os.path.isabs(value):
        root = str(Path(data_dir).resolve())
        if value.rstrip("/") == root:
            return DATA_DIR
        return portable_path(value, root)
    return value
