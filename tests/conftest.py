"""Shared pytest fixtures: paths to ../shared (tests that need it skip cleanly without it)."""
from __future__ import annotations

import fcntl
import gc
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
#: The test processes collect cycles after 50,000 new objects rather than Python's 700:
#: tracing a step makes tens of thousands of short-lived objects, and collecting them every
#: 700 took 4 % of the CPU of a loop of tiny trainings and exports in one process.
gc.set_threshold(50_000, 50, 100)

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
#: the test files that take longest under ``make test`` (their tests' summed times, longest
#: first; every file of 20 s or more on the idle 2-core machine). ``make test`` runs one
#: file per process (``--dist loadfile``) in the order of the collection
#: (``--no-loadscope-reorder``), so these start first and the files of a few seconds fill
#: the end: no process is left running a long file while the others have finished. A file
#: missing here only runs later.
SLOWEST_FIRST = [
    "test_export.py", "test_compare.py", "test_evaluate.py", "test_backends.py",
    "test_legacy_runs.py", "test_training.py", "test_benchmark.py", "test_multi_worker.py",
    "test_run_lock.py", "test_precision.py", "test_determinism.py", "test_kill_and_fuzz.py",
    "test_api.py", "test_fuzzing.py", "test_distributed.py", "test_shard_contents.py",
    "test_run_directory_faults.py", "test_ablations.py", "test_serving_client.py",
    "test_long_sentences.py", "test_bench_corpus_size.py", "test_faults.py",
    "test_extension_points.py", "test_tdlm.py", "test_write_faults_more.py",
    "test_own_corpus.py", "test_sdlm.py", "test_examples.py"]


def pytest_collection_modifyitems(session, config, items):
    """The :data:`SLOWEST_FIRST` files first, in its order, then the rest in theirs (a stable
    sort keeps each file's tests in their order)."""
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.path).name, len(rank)))


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
