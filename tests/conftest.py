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
