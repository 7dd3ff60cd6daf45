"""Shared pytest fixtures: paths to ../shared (tests that need it skip cleanly without it)."""
from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

#: Under pytest-xdist (``make test``: 3 processes on the machine's cores) each test process,
#: and every process it starts, gives TensorFlow one thread for each operation: several
#: processes that each spread every operation over all cores only wait on one another.
#: Set before TensorFlow is imported; a test that sets its own count (the determinism test)
#: still does.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

import pytest  # noqa: E402

from tcnlm_tf.models.registry import MODELS  # noqa: E402


REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("TCNLM_SHARED_DIR", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The real corpora in ../shared/data; skips the test when they are absent."""
    data = SHARED_DIR / "data"
    if not (data / "apnews" / "train.txt").is_file():
        pytest.skip(f"shared corpora not found at {data}")
    return data


#: tiny models on a tiny synthetic corpus, for export and serving tests (--seq-len 8 so
#: that some sentences span several windows)
TINY = ["--synthetic", "train_docs=60", "--synthetic", "valid_docs=8", "--synthetic",
        "test_docs=8", "--synthetic", "num_topics=4", "--synthetic", "content_vocab_size=120",
        "--synthetic", "seed=5", "--hidden-size", "16", "--embedding-dim", "12",
        "--batch-size", "16", "--seq-len", "8",
        "--epochs", "1", "--max-steps", "3", "--log-every", "100"]
#: TINY for one whole epoch (no --max-steps)
TINY_EPOCH = TINY[:TINY.index("--max-steps")] + TINY[TINY.index("--max-steps") + 2:]


def tiny_models() -> dict[str, list[str]]:
    """A tiny instance of every registered model, in every mode it trains in: the model's
    own test flags (its registry entry) beside TINY. Keys: the model name, with
    ``-<mode>`` for modes other than sentence."""
    return {name + ("" if mode == "sentence" else f"-{mode}"):
            ["--model", name, "--mode", mode, *spec.test_flags]
            for name, spec in MODELS.items() for mode in spec.modes}


TINY_MODELS = tiny_models()
#: what the ``exports`` fixture trains and exports: every tiny model, TCNLM trained with
#: the causal context (``--context preceding``) and a stream LSTM without line-end <eos>
EXPORT_MODELS = {**TINY_MODELS,
                 "tcnlm-preceding": TINY_MODELS["tcnlm"] + ["--context", "preceding"],
                 "lstm-stream-no-eos": TINY_MODELS["lstm-stream"] + ["--line-end", "none"]}


def git(*args: str, cwd: Path) -> str:
    """``git args`` in ``cwd``; its standard output (a failure raises)."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def init_repo(repo: Path) -> Path:
    """A new git repository at ``repo`` with a committer and one commit (a README)."""
    git("init", "-q", str(repo), cwd=repo.parent)
    git("config", "user.email", "test@example.com", cwd=repo)
    git("config", "user.name", "test", cwd=repo)
    (repo / "README").write_text("x\n")
    git("add", "README", cwd=repo)
    git("commit", "-q", "-m", "start", cwd=repo)
    return repo


def run_flags(workdir: Path, name: str) -> list[str]:
    """train.run flags that put run ``name`` and the corpus cache under ``workdir``."""
    return ["--runs-dir", str(workdir / "runs"), "--cache-dir", str(workdir / "cache"),
            "--run-name", name]
#: test files that use the session-wide ``exports`` fixture
EXPORT_FILES = {"test_export.py", "test_sdlm.py", "test_serving_client.py", "test_api.py",
                "test_serving_grpc.py"}


def pytest_collection_modifyitems(session, config, items):
    """The :data:`EXPORT_FILES` first, the rest in their order: under ``make test`` (one
    process per file, ``--dist loadfile``) every process then begins by building the shared
    exports, each with another model (:func:`exports`), instead of one process building
    them all while the others wait for them or have finished."""
    items.sort(key=lambda item: Path(item.path).name not in EXPORT_FILES)


#: the registered models that have topics
TOPIC_MODELS = [name for name, spec in MODELS.items() if spec.has_topics]


def shared_root(tmp_path_factory) -> Path:
    """A directory that the pytest-xdist processes of one test run share (their common
    base temporary directory), or the process's own without pytest-xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _export(root: Path, name: str) -> tuple[Path, Path]:
    """Train and export :data:`EXPORT_MODELS` ``name`` under ``root`` once per session:
    the first process to take its lock does it, the others then read its version."""
    from train.export import main as export_main
    from train.run import main as train_main

    done = root / f"{name}.version"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            train_main(TINY + EXPORT_MODELS[name] + [
                "--runs-dir", str(root / "runs"), "--run-name", name,
                "--cache-dir", str(root / "cache")])
            first = export_main(["--run", str(root / "runs" / name),
                                 "--output-dir", str(root / "saved_models")])
            done.write_text(str(first))
    return root / "runs" / name, Path(done.read_text())


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    """Tiny trained runs of every model type (3 steps), each exported once: ``(root,
    {name: (run directory, SavedModel version directory)})``. Built once per test run
    and shared by its processes (:func:`shared_root`), each process beginning with
    another model, so that several build at once; treat them as read-only (export or
    write elsewhere)."""
    root = shared_root(tmp_path_factory) / "exports"
    root.mkdir(exist_ok=True)
    names = list(EXPORT_MODELS)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    start = worker * len(names) // workers
    built = {name: _export(root, name) for name in names[start:] + names[:start]}
    return root, {name: built[name] for name in names}
