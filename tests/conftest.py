"""Shared pytest fixtures: paths to ../shared (tests that need it skip cleanly without it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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
        "--num-topics", "4", "--ntm-hidden", "16,16", "--batch-size", "16", "--seq-len", "8",
        "--epochs", "1", "--max-steps", "3", "--log-every", "100"]
TINY_MODELS = {"lstm": ["--model", "lstm"], "tcnlm": ["--model", "tcnlm", "--num-factors", "8"],
          "moe": ["--model", "moe"], "lstm-document": ["--model", "lstm", "--mode", "document"]}


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    """Tiny trained runs of every model type (3 steps), each exported once: ``(root,
    {name: (run directory, SavedModel version directory)})``."""
    from train.export import main as export_main
    from train.run import main as train_main

    root = tmp_path_factory.mktemp("export")
    out = {}
    for name, flags in TINY_MODELS.items():
        train_main(TINY + flags + ["--runs-dir", str(root / "runs"), "--run-name", name,
                                   "--cache-dir", str(root / "cache")])
        first = export_main(["--run", str(root / "runs" / name),
                             "--output-dir", str(root / "saved_models")])
        out[name] = (root / "runs" / name, first)
    return root, out
